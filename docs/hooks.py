"""MkDocs hook: the nav of mkdocs.yml, less the pages that are not there, plus the pages it leaves out.

A page the nav names but the docs do not have (one not written yet) is dropped instead of failing the
strict build; a page in docs/ the nav does not name joins the "Guide" section (its title from its first
heading), so a new page is published without editing mkdocs.yml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

GUIDE = "Guide"


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    pages = {p.relative_to(docs).as_posix() for p in docs.rglob("*.md")}
    listed: set[str] = set()

    def keep(items: list) -> list:
        out = []
        for item in items:
            if isinstance(item, str):
                page = item
                title, sub = None, None
            else:
                (title, value), = item.items()
                page, sub = (value, None) if isinstance(value, str) else (None, value)
            if sub is not None:
                sub = keep(sub)
                if sub:
                    out.append({title: sub})
            elif "://" in page:
                out.append(item)
            elif page in pages:
                listed.add(page)
                out.append(item)
        return out

    nav = keep(config["nav"] or [])
    extra = sorted(pages - listed)
    if extra:
        section = next((item for item in nav if isinstance(item, dict) and GUIDE in item), None)
        if section is None:
            section = {GUIDE: []}
            nav.append(section)
        section[GUIDE].extend(extra)
    config["nav"] = nav
    return config
