"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``)."""


def write_section(path, heading, header, section):
    """Replace the section starting with ``heading`` in the markdown file ``path``.

    The other sections are left alone; a missing file starts from ``header`` and a
    missing section is appended.
    """
    text = path.read_text() if path.exists() else header
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(heading))
        end = len(text) if nxt < 0 else nxt + 1
        text = text[:start] + section + ("\n" if nxt >= 0 else "") + text[end:]
    path.write_text(text.rstrip("\n") + "\n")
