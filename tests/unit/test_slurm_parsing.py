import pytest

from curator_array.slurm.commands import SlurmCommandError, expand_hostlist, slurm_command


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("node1", ["node1"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("gpu-[01,03-05]", ["gpu-01", "gpu-03", "gpu-04", "gpu-05"]),
        ("a[1-2],b7,c[009-011]", ["a1", "a2", "b7", "c009", "c010", "c011"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ],
)
def test_expand_hostlist(expression, expected):
    assert expand_hostlist(expression) == expected


def test_bad_hostlist_and_missing_tool():
    with pytest.raises(SlurmCommandError, match="cannot read node list"):
        expand_hostlist("node[a-b]")
    with pytest.raises(SlurmCommandError, match="not found"):
        slurm_command(["definitely-not-a-slurm-tool-xyz"])
