"""``curator-array report``: one self-contained HTML page about a logical run.

Everything comes from the checkpoint (completion manifests, attempt records, run.json)
and, where SLURM answers, from ``squeue``. ``charts`` draws with matplotlib as inline
SVG; ``page`` fills ``templates/report.html.j2``. The page has no script and loads
nothing, so it can be mailed, archived or opened offline.

May import: core. (matplotlib and jinja2 from outside.)
"""
