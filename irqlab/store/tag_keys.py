"""What a tag key may be: what the dashboard's tag filter and the store's JSON path
(`$."KEY"`, store/share.py runs_page_where) can name without escaping. One rule for
setting a tag (`irqlab tag`, `run --tag`) and for filtering by one (issue 47: `irqlab tag
2 'k"=v'` was stored, then no page could filter by it). Its own module: the socket
(share.py), the store's management and the dashboard all read it."""

from __future__ import annotations

TAG_KEY_MAX = 200
TAG_KEY_RULE = f"a tag key is 1-{TAG_KEY_MAX} characters without quotes or backslashes"


def valid_tag_key(key: str) -> bool:
    return 0 < len(key) <= TAG_KEY_MAX and '"' not in key and "\\" not in key
