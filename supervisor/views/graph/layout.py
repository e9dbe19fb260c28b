"""A layered, deterministic layout of a workflow's definition snapshot.

Owns ``layout(snapshot) -> Layout``: nodes ranked by their longest path from
``startAt`` (loops found by a depth-first walk and kept as back edges, so a
retry edge does not push its target down), ordered within a rank by a few
barycenter sweeps, placed on a grid of character cells, and every edge an
orthogonal polyline through the gaps between ranks. The units are cells: the
text renderer draws them as they are, the SVG renderer scales them. Also
``edge_specs`` (the snapshot's edges as source, target and label), which the
DOT renderer shares. Pure: no I/O, no clock, no randomness. Imports the
standard library only; never another wing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BOX_H = 4  # top border, the id, the kind (and a state), bottom border
STATE_ROOM = 10  # " · " and a state word of seven letters beside the kind
MIN_W = 12
H_GAP = 3  # cells between two boxes of a rank
BACK_PORT = 2  # back edges leave and enter this far left of a box's right border
SWEEPS = 4


@dataclass(frozen=True)
class Box:
    """One node: the cells ``x .. x+w-1`` by ``y .. y+h-1``."""

    id: str
    kind: str
    x: int
    y: int
    w: int
    h: int
    rank: int
    group: str | None = None  # the include (mount path) the node belongs to

    @property
    def label(self) -> str:
        return self.id

    @property
    def center(self) -> int:
        return self.x + self.w // 2


@dataclass(frozen=True)
class EdgePath:
    """One edge: orthogonal ``points`` from the cell under its source to the cell
    over its target (where the arrow goes); ``label`` a switch case's value."""

    source: str
    target: str
    label: str | None
    points: tuple[tuple[int, int], ...]
    back: bool = False
    label_at: tuple[int, int] | None = None


@dataclass(frozen=True)
class Group:
    """The cells around the nodes of one include, and its label (the mount path)."""

    label: str
    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True)
class Layout:
    name: str
    start: str | None
    boxes: tuple[Box, ...]
    edges: tuple[EdgePath, ...]
    groups: tuple[Group, ...]
    width: int
    height: int
    ranks: int

    def box(self, node_id: str) -> Box:
        for found in self.boxes:
            if found.id == node_id:
                return found
        raise KeyError(node_id)


@dataclass(frozen=True)
class EdgeSpec:
    source: str
    target: str
    label: str | None


def case_label(value: Any) -> str:
    """A case value as people read it: strings bare, everything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def node_list(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The snapshot's nodes with a string id, first occurrence of each id only."""
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    for node in snapshot.get("nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("id"), str) and node["id"] not in seen:
            seen.add(node["id"])
            found.append(node)
    return found


def edge_specs(snapshot: Mapping[str, Any]) -> list[EdgeSpec]:
    """Every edge between two known nodes; two cases to one target become one edge."""
    ids = {n["id"] for n in node_list(snapshot)}
    merged: dict[tuple[str, str], list[str | None]] = {}
    for item in snapshot.get("edges") or []:
        if not isinstance(item, dict):
            continue
        source = item.get("source")
        pairs: list[tuple[Any, str | None]] = []
        if "cases" in item or "default" in item:
            for case in item.get("cases") or []:
                if isinstance(case, dict):
                    pairs.append((case.get("target"), case_label(case.get("value"))))
            if item.get("default") is not None:
                pairs.append((item.get("default"), "default"))
        else:
            pairs.append((item.get("target"), None))
        for target, label in pairs:
            if isinstance(source, str) and isinstance(target, str) and source in ids \
                    and target in ids:
                labels = merged.setdefault((source, target), [])
                if label not in labels:
                    labels.append(label)
    return [EdgeSpec(s, t, ", ".join(x for x in labels if x is not None) or None)
            for (s, t), labels in merged.items()]


def groups_of(nodes: list[dict[str, Any]]) -> dict[str, str | None]:
    """Each node's innermost include: ``a/b/c`` is in ``a/b``; an include's entry and
    exit nodes (kind ``mount``) are in the include they mount."""
    found: dict[str, str | None] = {}
    for node in nodes:
        node_id = node["id"]
        mount = node.get("mount")
        if node.get("kind") == "mount" and isinstance(mount, str) and mount:
            found[node_id] = mount
        elif "/" in node_id:
            found[node_id] = node_id.rsplit("/", 1)[0]
        else:
            found[node_id] = None
    return found


def _walk(ids: list[str], start: str | None, succ: dict[str, list[str]]
          ) -> tuple[list[str], set[tuple[str, str]], set[str]]:
    """Depth-first from ``start``, then from each node not yet seen (definition order):
    the visiting order, the back edges (to a node still on the walk's path), and the
    nodes reachable from ``start``."""
    order: list[str] = []
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the path, 2: finished
    reachable: set[str] = set()
    roots = ([start] if start in succ else []) + ids
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        order.append(root)
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            if i < len(succ[node]):
                stack[-1] = (node, i + 1)
                nxt = succ[node][i]
                mark = state.get(nxt)
                if mark == 1:
                    back.add((node, nxt))
                elif mark is None:
                    state[nxt] = 1
                    order.append(nxt)
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                stack.pop()
        if root == start:
            reachable = set(order)
    return order, back, reachable


def _ranks(ids: list[str], forward: list[tuple[str, str]], reachable: set[str],
           order: list[str]) -> dict[str, int]:
    """Longest path from the start over the forward edges; what the start cannot
    reach is ranked the same way below everything it can."""
    rank: dict[str, int] = {}
    pos = {n: i for i, n in enumerate(order)}

    def longest(members: set[str], base: int) -> None:
        indeg = dict.fromkeys(members, 0)
        out: dict[str, list[str]] = {n: [] for n in members}
        for s, t in forward:
            if s in members and t in members:
                out[s].append(t)
                indeg[t] += 1
        ready = sorted((n for n in members if indeg[n] == 0), key=pos.__getitem__)
        for n in ready:
            rank[n] = base
        while ready:
            node = ready.pop(0)
            for t in out[node]:
                rank[t] = max(rank.get(t, base), rank[node] + 1)
                indeg[t] -= 1
                if indeg[t] == 0:
                    ready.append(t)

    longest(set(reachable), 0)
    rest = {n for n in ids if n not in reachable}
    if rest:
        longest(rest, max(rank.values(), default=-1) + 1)
    return rank


def _crossings(upper: list[str], lower: list[str], links: list[tuple[str, str]]) -> int:
    pu = {n: i for i, n in enumerate(upper)}
    pl = {n: i for i, n in enumerate(lower)}
    pairs = sorted((pu[a], pl[b]) for a, b in links if a in pu and b in pl)
    count = 0
    for i, (a1, b1) in enumerate(pairs):
        for a2, b2 in pairs[i + 1:]:
            if a2 > a1 and b2 < b1:
                count += 1
    return count


def _order(layers: list[list[str]], links: list[tuple[str, str]],
           group: dict[str, str | None]) -> list[list[str]]:
    """Barycenter sweeps down and up; the ordering with the fewest crossings wins."""
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a, b in links:
        succs.setdefault(a, []).append(b)
        preds.setdefault(b, []).append(a)

    # A sweep reorders within ranks, never between them: the links of each pair of
    # adjacent ranks are found once, so counting is not every link for every pair.
    rank_of_node = {n: r for r, layer in enumerate(layers) for n in layer}
    between: list[list[tuple[str, str]]] = [[] for _ in range(max(len(layers) - 1, 0))]
    for a, b in links:
        r = rank_of_node.get(a)
        if r is not None and r + 1 < len(layers) and rank_of_node.get(b) == r + 1:
            between[r].append((a, b))

    def total(current: list[list[str]]) -> int:
        return sum(_crossings(current[r], current[r + 1], between[r])
                   for r in range(len(current) - 1))

    def sweep(current: list[list[str]], down: bool) -> list[list[str]]:
        result = [list(layer) for layer in current]
        indices = range(1, len(result)) if down else range(len(result) - 2, -1, -1)
        for r in indices:
            ref = result[r - 1] if down else result[r + 1]
            pos = {n: i for i, n in enumerate(ref)}
            neighbours = preds if down else succs
            keyed = []
            for i, n in enumerate(result[r]):
                near = [pos[m] for m in neighbours.get(n, []) if m in pos]
                keyed.append((sum(near) / len(near) if near else float(i), i, n))
            keyed.sort()
            result[r] = [n for _, _, n in keyed]
            result[r] = _keep_groups_together(result[r], group)
        return result

    best, best_count = layers, total(layers)
    current = layers
    for i in range(SWEEPS):
        current = sweep(current, down=i % 2 == 0)
        count = total(current)
        if count < best_count:
            best, best_count = current, count
    return best


def _keep_groups_together(layer: list[str], group: dict[str, str | None]) -> list[str]:
    """Members of one include side by side, where the first of them stands."""
    first: dict[str | None, int] = {}
    for i, n in enumerate(layer):
        g = group.get(n)
        first.setdefault(g, i)
    return sorted(layer, key=lambda n: (first[group.get(n)] if group.get(n) is not None
                                        else layer.index(n), layer.index(n)))


def _place(layers: list[list[str]], widths: dict[str, int], links: list[tuple[str, str]]
           ) -> dict[str, int]:
    """Each node's left x: packed, then pulled toward its neighbours' centers
    (down, up, down) without changing the order or closing a gap."""
    x: dict[str, int] = {}
    for layer in layers:
        at = 0
        for n in layer:
            x[n] = at
            at += widths[n] + H_GAP
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a, b in links:
        succs.setdefault(a, []).append(b)
        preds.setdefault(b, []).append(a)

    def center(n: str) -> int:
        return x[n] + widths[n] // 2

    def align(layer: list[str], neighbours: dict[str, list[str]]) -> None:
        want = []
        for n in layer:
            near = [center(m) for m in neighbours.get(n, [])]
            want.append(sum(near) // len(near) - widths[n] // 2 if near else x[n])
        left = list(want)
        for i in range(1, len(layer)):
            left[i] = max(want[i], left[i - 1] + widths[layer[i - 1]] + H_GAP)
        right = list(want)
        for i in range(len(layer) - 2, -1, -1):
            right[i] = min(want[i], right[i + 1] - widths[layer[i]] - H_GAP)
        # Both satisfy the gaps, so their midpoint does too (rounded the same way).
        for i, n in enumerate(layer):
            x[n] = (left[i] + right[i]) // 2
            if i:
                x[n] = max(x[n], x[layer[i - 1]] + widths[layer[i - 1]] + H_GAP)

    for down in (True, False, True, False, True):
        rows = layers[1:] if down else layers[-2::-1]
        for layer in rows:
            align(layer, preds if down else succs)
    low = min(x.values(), default=0)
    return {n: v - low + 3 for n, v in x.items()}


def layout(snapshot: Mapping[str, Any]) -> Layout:
    """The layout of a ``pi-workflows.workflow.v1`` snapshot (see the module docstring)."""
    nodes = node_list(snapshot)
    ids = [n["id"] for n in nodes]
    kinds = {n["id"]: str(n.get("kind") or "") for n in nodes}
    group = groups_of(nodes)
    specs = edge_specs(snapshot)
    succ: dict[str, list[str]] = {n: [] for n in ids}
    for spec in specs:
        succ[spec.source].append(spec.target)
    start = snapshot.get("startAt")
    start_id = start if isinstance(start, str) and start in succ else None
    order, back, reachable = _walk(ids, start_id, succ)
    forward = [(s.source, s.target) for s in specs if (s.source, s.target) not in back
               and s.source != s.target]
    rank = _ranks(ids, forward, reachable, order)
    # An edge that still goes up (from an unreachable node into the reachable part)
    # is drawn as a back edge too.
    back |= {(s.source, s.target) for s in specs if rank[s.source] >= rank[s.target]}
    nranks = max(rank.values(), default=-1) + 1

    # Long edges pass through one placeholder per rank they cross.
    widths = {n: max(len(n), len(kinds[n]) + STATE_ROOM, MIN_W - 4) + 4 for n in ids}
    pos_in_order = {n: i for i, n in enumerate(order)}
    layers: list[list[str]] = [[] for _ in range(nranks)]
    for n in sorted(ids, key=pos_in_order.__getitem__):
        layers[rank[n]].append(n)
    links: list[tuple[str, str]] = []
    chains: dict[tuple[str, str], list[str]] = {}
    for spec in specs:
        key = (spec.source, spec.target)
        if key in back:
            continue
        chain = [spec.source]
        for r in range(rank[spec.source] + 1, rank[spec.target]):
            dummy = f"\x00{spec.source}\x00{spec.target}\x00{r}"
            widths[dummy] = 1
            layers[r].append(dummy)
            chain.append(dummy)
        chain.append(spec.target)
        chains[key] = chain
        links += list(itertools.pairwise(chain))
    layers = _order(layers, links, group)
    x = _place(layers, widths, links)

    # Where each edge crosses each gap: gap g lies above rank g (gap nranks: below the last).
    def port(n: str, is_back: bool) -> int:
        return x[n] + (widths[n] - BACK_PORT if is_back and widths[n] > 2 * BACK_PORT
                       else widths[n] // 2)

    channels: list[dict[str, int]] = [{} for _ in range(nranks + 1)]
    jogs: dict[tuple[str, str], list[tuple[int, int, int, str]]] = {}
    for key, chain in chains.items():
        steps = []
        for a, b in itertools.pairwise(chain):
            xa, xb = port(a, False), port(b, False)
            gap = rank_of(a, rank) + 1
            steps.append((gap, xa, xb, a))
            if xa != xb:
                channels[gap].setdefault(a, xa)
        jogs[key] = steps
    right_edge = max((x[n] + widths[n] for layer in layers for n in layer), default=0)
    back_keys = [(s.source, s.target) for s in specs if (s.source, s.target) in back]
    for s, t in back_keys:
        channels[rank[s] + 1].setdefault(f"\x01{s}", port(s, True))
        channels[rank[t]].setdefault(f"\x02{t}", port(t, True))

    # Each gap: a row leaving the boxes above, its channels, a row for labels, a row
    # for the arrows; the top and bottom gaps only as tall as their channels need.
    channel_y: list[dict[str, int]] = []
    rank_y: list[int] = []
    y = 0
    for g in range(nranks + 1):
        names = sorted(channels[g], key=lambda c: (channels[g][c], c))
        top_gap, bottom_gap = g == 0, g == nranks
        if top_gap:
            rows = len(names) + 1 if names else 1
            first = 0
        elif bottom_gap:
            rows = len(names) + 1 if names else 0
            first = 1
        else:
            rows = len(names) + 3
            first = 1
        channel_y.append({c: y + first + i for i, c in enumerate(names)})
        y += rows
        if g < nranks:
            rank_y.append(y)
            y += BOX_H
    height = y

    boxes = tuple(Box(n, kinds[n], x[n], rank_y[rank[n]], widths[n], BOX_H, rank[n], group[n])
                  for layer in layers for n in layer if n in kinds)
    box_of = {b.id: b for b in boxes}

    edges: list[EdgePath] = []
    lane = right_edge + 2
    label_right = 0
    for spec in specs:
        key = (spec.source, spec.target)
        src, dst = box_of[spec.source], box_of[spec.target]
        if key in back:
            sx, tx = port(spec.source, True), port(spec.target, True)
            y1 = channel_y[src.rank + 1][f"\x01{spec.source}"]
            y2 = channel_y[dst.rank][f"\x02{spec.target}"]
            points = [(sx, src.y + src.h), (sx, y1), (lane, y1), (lane, y2), (tx, y2),
                      (tx, dst.y - 1)]
            at = (lane + 1, (y1 + y2) // 2) if spec.label else None
            if spec.label:
                label_right = max(label_right, lane + 1 + len(spec.label))
            edges.append(EdgePath(spec.source, spec.target, spec.label,
                                  _simplify(points), True, at))
            lane += 2
            continue
        points = [(src.center, src.y + src.h)]
        label_at: tuple[int, int] | None = None
        for i, (gap, xa, xb, upper) in enumerate(jogs[key]):
            if xa != xb:
                cy = channel_y[gap][upper]
                points += [(xa, cy), (xb, cy)]
            if i == 0 and spec.label:
                label_row = rank_y[gap] - 2
                label_at = (xb + 1, label_row)
                label_right = max(label_right, xb + 1 + len(spec.label))
        points.append((dst.center, dst.y - 1))
        edges.append(EdgePath(spec.source, spec.target, spec.label, _simplify(points),
                              False, label_at))

    groups = _group_boxes(boxes)
    width = max([right_edge + 1, lane, label_right + 1] + [g.x + g.w + 1 for g in groups])
    name = snapshot.get("name")
    return Layout(str(name) if isinstance(name, str) else "", start_id, boxes, tuple(edges),
                  groups, width, height, nranks)


def rank_of(n: str, rank: Mapping[str, int]) -> int:
    """A node's rank, or a placeholder's (its rank is the last part of its name)."""
    if n.startswith("\x00"):
        return int(n.rsplit("\x00", 1)[1])
    return rank[n]


def _simplify(points: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Drop repeated points and the middle of three in a line."""
    out: list[tuple[int, int]] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2:
            (ax, ay), (bx, by) = out[-2], out[-1]
            if (ax == bx == p[0]) or (ay == by == p[1]):
                out[-1] = p
                continue
        out.append(p)
    return tuple(out)


def _group_boxes(boxes: Sequence[Box]) -> tuple[Group, ...]:
    """A frame one cell around each include's nodes (nested includes inside their parent)."""
    members: dict[str, list[Box]] = {}
    for b in boxes:
        g = b.group
        while g:
            members.setdefault(g, []).append(b)
            g = g.rsplit("/", 1)[0] if "/" in g else None
    found = []
    for label in sorted(members):
        inside = members[label]
        depth = label.count("/")
        pad = 2 - min(depth, 1)
        x0 = min(b.x for b in inside) - pad
        y0 = min(b.y for b in inside) - 1
        x1 = max(b.x + b.w for b in inside) + pad
        y1 = max(b.y + b.h for b in inside) + 1
        found.append(Group(label, max(x0, 0), max(y0, 0), x1 - max(x0, 0), y1 - max(y0, 0)))
    return tuple(found)
