"""Per-cluster settings (``site_configs/<name>.toml``) rendered into sbatch scripts.

The launch logic lives once, in ``site_configs/templates``: a base script plus one small
template per runtime (``runtime_<name>.sbatch.j2``), which says how an element is launched
and, with ``{% set forwards_named_variables = true %}``, that only the variables the script
names reach the element (the base script then names them). ``RUNTIMES`` holds the rest of
what a runtime is; adding one is its template and one row there. A site file holds only
what differs between clusters. Every value that reaches a shell passes the ``sh`` filter
(POSIX quoting). Values that end up in ``#SBATCH`` lines, which sbatch parses rather than a
shell, must match a strict pattern.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

from ..core.errors import ConfigError
from ..core.layout import METADATA_DIR, OCI_BUNDLES_DIR


@dataclass(frozen=True)
class Runtime:
    """A way to launch an element, besides its template: in a container image (``image``,
    mounts, the entrypoint inside it) or from a shared install (``install_dir``)."""

    container: bool


RUNTIMES: dict[str, Runtime] = {
    "pyxis": Runtime(container=True),
    "oci": Runtime(container=True),
    "apptainer": Runtime(container=True),
    "charliecloud": Runtime(container=True),
    "baremetal": Runtime(container=False),
}
# What every element needs besides the run options' variables: which shard it is.
SHARD_VARIABLES = ("SHARD_INDEX_OFFSET", "TOTAL_SHARDS", "MINIMUM_SHARD_INDEX")
DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:,+=@/%-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENTRYPOINT_IN_IMAGE = "/opt/curator-array/entrypoints/curator-array-entrypoint"
# What an OCI job script runs with the node's python3 to write its bundle (standard library only).
BUNDLE_WRITER = Path(__file__).with_name("oci_bundle.py")
# Set per task by slurmstepd, and by the batch shell for its own task; a container sees the
# step's environment only, so a job script that launches containers unsets these first.
TASK_VARIABLES = ("SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_TASK_PID", "SLURMD_NODENAME",
                  "SLURM_GTIDS", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN")
# Job scripts export the names their site's [env] set here, so an element can tell them apart.
SITE_ENV_VARIABLE = "CURATOR_ARRAY_SITE_ENV"


@dataclass(frozen=True)
class SiteConfig:
    """One cluster. Field names are the TOML keys."""

    name: str
    runtime: str
    description: str = ""
    partition: str = ""
    account: str = ""
    qos: str = ""
    time: str = "04:00:00"
    nodes: int = 1
    cpus_per_task: int = 8
    memory: str = ""
    gpus: int = 0
    image: str = ""
    mounts: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    extra_sbatch: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    log_dir: str = ""
    signal_seconds: int = 300
    requeue_on_signal: bool = False
    install_dir: str = ""
    venv: str = ""

    @property
    def container(self) -> bool:
        return RUNTIMES[self.runtime].container

    @property
    def entrypoint(self) -> str:
        if self.container:
            return ENTRYPOINT_IN_IMAGE
        return f"{self.install_dir.rstrip('/')}/entrypoints/curator-array-entrypoint"


def _line_of(text: str, key: str) -> int | None:
    """The line where ``key`` is assigned (``key = ...``, quoted or not) or opens a table (``[key]``)."""
    name = re.escape(key)
    # [ \t], not \s: \s also matches newlines, which would report a blank line above the key.
    pattern = re.compile(
        rf"^[ \t]*(?:{name}|\"{name}\"|'{name}')[ \t]*=|^[ \t]*\[[ \t]*{name}[ \t]*\]", re.MULTILINE
    )
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _check_type(path: Path, text: str, key: str, value: Any, expected: type) -> None:
    origin = getattr(expected, "__origin__", expected)
    ok = isinstance(value, origin) and not (origin is int and isinstance(value, bool))
    if ok and origin is list:
        ok = all(isinstance(item, str) for item in value)
    if ok and origin is dict:
        ok = all(isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in value.items())
    if not ok:
        line = _line_of(text, key)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: key {key!r} must be {origin.__name__}, got {type(value).__name__} {value!r}")


def load_site(path: str | Path) -> SiteConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read site config {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    types = {f.name: f.type for f in fields(SiteConfig)}
    hints = {
        "str": str, "int": int, "bool": bool, "list[str]": list[str], "dict[str, str]": dict[str, str],
    }
    for key, value in data.items():
        if key not in types or key == "name":
            line = _line_of(text, key)
            known = ", ".join(sorted(k for k in types if k != "name"))
            raise ConfigError(f"{path}:{line or '?'}: unknown key {key!r} (known keys: {known})")
        _check_type(path, text, key, value, hints[types[key]] if isinstance(types[key], str) else types[key])
    if "runtime" not in data:
        raise ConfigError(f"{path}: missing key 'runtime' (one of {', '.join(RUNTIMES)})")
    if data["runtime"] not in RUNTIMES:
        line = _line_of(text, "runtime")
        raise ConfigError(f"{path}:{line or '?'}: runtime: {data['runtime']!r} is not one of {', '.join(RUNTIMES)}")
    site = SiteConfig(name=path.stem, **{k: v for k, v in data.items()})
    validate_site(site, path, text)
    return site


def validate_site(site: SiteConfig, path: Path, text: str) -> None:
    def fail(key: str, message: str) -> None:
        line = _line_of(text, key)
        raise ConfigError(f"{path}:{line or '?'}: {key}: {message}")

    for key in ("partition", "account", "qos", "time", "memory"):
        if not DIRECTIVE_VALUE.match(getattr(site, key)):
            fail(key, f"{getattr(site, key)!r} may only contain letters, digits and _.:,+=@/%- (it becomes an #SBATCH line)")
    for key in ("nodes", "cpus_per_task"):
        if getattr(site, key) < 1:
            fail(key, "must be >= 1")
    if site.gpus < 0 or site.signal_seconds < 0:
        fail("gpus" if site.gpus < 0 else "signal_seconds", "must be >= 0")
    for line in site.extra_sbatch:
        if not line.startswith("--") or not DIRECTIVE_VALUE.match(line):
            fail("extra_sbatch", f"{line!r} must be one long option like --exclusive or --constraint=a100")
    for name in site.env:
        if not ENV_NAME.match(name):
            fail("env", f"{name!r} is not a valid environment variable name")
    for mount in site.mounts:
        if mount.count(":") > 2 or not mount.startswith("/"):
            fail("mounts", f"{mount!r} must be /host/path[:/container/path[:ro]]")
    if not site.container and not site.install_dir:
        fail("runtime", f"a {site.runtime} site needs install_dir (the curator-array checkout every node sees)")


def shell_quote(value: Any) -> str:
    return shlex.quote(str(value))


def template_environment(templates: Path):
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["sh"] = shell_quote
    return env


@dataclass(frozen=True)
class ScriptFacts:
    """What a job script says about the run it launches, from the layers above this one:
    the file formats (for its comment) and the run options' variables (it forwards them)."""

    input_formats: tuple[str, ...]
    output_formats: tuple[str, ...]
    variables: tuple[str, ...] = ()


def render_site(site: SiteConfig, templates: Path, facts: ScriptFacts) -> str:
    environment = template_environment(templates)
    template = environment.get_template(f"runtime_{site.runtime}.sbatch.j2")
    forwarded = list(dict.fromkeys([*SHARD_VARIABLES, SITE_ENV_VARIABLE, *facts.variables, *site.env]))
    return template.render(site=site, source=f"site_configs/{site.name}.toml",
                           input_formats=facts.input_formats, output_formats=facts.output_formats,
                           forwarded=forwarded, task_variables=TASK_VARIABLES,
                           job_bundles_dir=f"{METADATA_DIR}/{OCI_BUNDLES_DIR}", bundle_writer=BUNDLE_WRITER.read_text().rstrip("\n"))


def site_names(sites_dir: Path) -> list[str]:
    return sorted(p.stem for p in sites_dir.glob("*.toml"))


def write_rendered(sites_dir: Path, name: str, facts: ScriptFacts) -> tuple[Path, bool]:
    """Render ``name`` next to its TOML file; returns (path, whether the content changed)."""
    site = load_site(sites_dir / f"{name}.toml")
    text = render_site(site, sites_dir / "templates", facts)
    target = sites_dir / f"{name}.sbatch"
    changed = not target.exists() or target.read_text() != text
    if changed:
        target.write_text(text)
    target.chmod(0o755)
    return target, changed
