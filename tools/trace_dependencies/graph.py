"""A small directed graph with the part of networkx's ``DiGraph`` interface trace-deps uses (nodes and edges with
attribute dicts, predecessors / successors, copies, subgraphs, ancestors). The analysis builds and queries it
without importing networkx (about half of the tool's start-up time); ``to_networkx()`` gives a real
``networkx.DiGraph`` when an output or a caller needs networkx's algorithms."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

TYPE_CHECKING = False  # typing is not imported at run time: about 5 ms of every trace-deps start-up
if TYPE_CHECKING:
    from typing import Any


class NodeView:
    """``g.nodes``: ``g.nodes[n]`` is n's attribute dict, ``g.nodes(data=True)`` yields ``(n, attrs)``."""

    __slots__ = ("_attrs",)

    def __init__(self, attrs: dict[str, dict[str, Any]]):
        self._attrs = attrs

    def __getitem__(self, node: str) -> dict[str, Any]:
        return self._attrs[node]

    def __contains__(self, node: object) -> bool:
        return node in self._attrs

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def __call__(self, data: bool = False):
        return iter(self._attrs.items()) if data else iter(self._attrs)

    def get(self, node: str, default: Any = None) -> Any:
        return self._attrs.get(node, default)

    def items(self):
        return self._attrs.items()


class Graph:
    """Directed graph: nodes are strings with an attribute dict, edges carry an attribute dict."""

    def __init__(self) -> None:
        self._node: dict[str, dict[str, Any]] = {}
        self._succ: dict[str, dict[str, dict[str, Any]]] = {}
        self._pred: dict[str, dict[str, dict[str, Any]]] = {}
        self.nodes = NodeView(self._node)  # ``g.nodes[n]``, ``g.nodes(data=True)``

    # -- building --------------------------------------------------------------------------------------------
    def add_node(self, node: str, **attrs: Any) -> None:
        if node in self._node:
            self._node[node].update(attrs)
            return
        self._node[node] = attrs
        self._succ[node] = {}
        self._pred[node] = {}

    def set_node_attrs(self, node: str, attrs: dict[str, Any]) -> None:
        """Replace ``node``'s attribute dict (the node must exist)."""
        self._node[node] = attrs

    def add_nodes_from(self, nodes: Iterable) -> None:
        for item in nodes:
            if isinstance(item, tuple):
                self.add_node(item[0], **item[1])
            else:
                self.add_node(item)

    def add_edge(self, u: str, v: str, **attrs: Any) -> None:
        for node in (u, v):
            if node not in self._node:
                self.add_node(node)
        data = self._succ[u].get(v)
        if data is None:
            data = {}
            self._succ[u][v] = data
            self._pred[v][u] = data
        data.update(attrs)

    def add_edge_once(self, u: str, v: str, kind: str, loc: str | None) -> None:
        """Add ``u -> v`` with ``kind`` and ``loc`` unless the edge exists (the engine's hot path)."""
        succ = self._succ.get(u)
        if succ is not None and v in succ:
            return
        if succ is None or v not in self._node:
            self.add_edge(u, v, kind=kind, loc=loc)
            return
        data = {"kind": kind, "loc": loc}
        succ[v] = data
        self._pred[v][u] = data

    def add_edges_from(self, edges: Iterable[tuple]) -> None:
        for edge in edges:
            self.add_edge(edge[0], edge[1], **(edge[2] if len(edge) > 2 else {}))

    def remove_nodes_from(self, nodes: Iterable[str]) -> None:
        for node in list(nodes):
            if node not in self._node:
                continue
            for succ in self._succ.pop(node):
                del self._pred[succ][node]
            for pred in self._pred.pop(node):
                del self._succ[pred][node]
            del self._node[node]

    # -- reading ---------------------------------------------------------------------------------------------
    def edges(self, data: bool = False):
        for u, succs in self._succ.items():
            for v, attrs in succs.items():
                yield (u, v, attrs) if data else (u, v)

    def has_edge(self, u: str, v: str) -> bool:
        return v in self._succ.get(u, ())

    def predecessors(self, node: str) -> Iterator[str]:
        return iter(self._pred[node])

    def successors(self, node: str) -> Iterator[str]:
        return iter(self._succ[node])

    def in_degree(self, node: str) -> int:
        return len(self._pred[node])

    def number_of_nodes(self) -> int:
        return len(self._node)

    def number_of_edges(self) -> int:
        return sum(len(s) for s in self._succ.values())

    def __contains__(self, node: object) -> bool:
        return node in self._node

    def __iter__(self) -> Iterator[str]:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def ancestors(self, node: str) -> set[str]:
        """Every node with a path to ``node`` (``node`` itself excluded)."""
        seen: set[str] = set()
        queue = deque(self._pred[node])
        while queue:
            current = queue.popleft()
            if current not in seen:
                seen.add(current)
                queue.extend(p for p in self._pred[current] if p not in seen)
        seen.discard(node)
        return seen

    # -- copies ----------------------------------------------------------------------------------------------
    def subgraph(self, nodes: Iterable[str]) -> Graph:
        """A new graph (not a view) with ``nodes`` in the given order and the edges between them."""
        keep = [n for n in nodes if n in self._node]
        wanted = set(keep)
        out = Graph()
        for node in keep:
            out.add_node(node, **self._node[node])
        for u in keep:
            for v, attrs in self._succ[u].items():
                if v in wanted:
                    out.add_edge(u, v, **attrs)
        return out

    def copy(self) -> Graph:
        return self.subgraph(self._node)

    def to_networkx(self):
        """The same graph as a ``networkx.DiGraph`` (imports networkx)."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from((n, dict(a)) for n, a in self._node.items())
        g.add_edges_from((u, v, dict(a)) for u, v, a in self.edges(data=True))
        return g


__all__ = ["Graph", "NodeView"]
