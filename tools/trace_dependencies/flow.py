"""Flow-sensitive locals: which assignments of a local reach each use (reaching definitions over one function's
statements). A use inside a nested function, a lambda or a comprehension that binds the same name is not mapped:
it sees every assignment (closures run later)."""

from __future__ import annotations

import ast

from .scan import AssignSite, FuncInfo, _fields

#: Stands for "the parameter's value on entry" in a set of reaching definitions.
PARAM = "<param>"

_NESTED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_COMPS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})

Env = dict[str, frozenset]


def _in_source_order(sites: frozenset) -> tuple:
    """A set of reaching definitions as a tuple in source order (the parameter first): a set's own order follows
    object addresses and string hashes, which change from run to run."""
    if len(sites) == 1:
        return tuple(sites)
    return tuple(sorted(sites, key=lambda s: -1 if s is PARAM else s.order))


def reaching(info: FuncInfo) -> dict[int, tuple]:
    """``id(Name node) -> (AssignSite | PARAM, ...)``: the definitions that reach each use of a local of ``info``
    (and, for ``x += ...``, the ones its target reads). Only locals with something to tell apart are mapped:
    those assigned more than once and parameters that are assigned. A local assigned once has the same value at
    every use (and each variable's reaching set is computed independently of the others)."""
    if isinstance(info.node, ast.Lambda) or not isinstance(getattr(info.node, "body", None), list):
        return {}
    params = {*info.params, *(n for n in (info.vararg, info.kwarg) if n)}
    tracked = {name for name, sites in info.assigns.items() if len(sites) > 1 or name in params}
    if not tracked:
        return {}
    return _Reaching(info, tracked).run()


def _merge(envs: list[Env | None]) -> Env | None:
    live = [e for e in envs if e is not None]
    if not live:
        return None
    out: dict[str, frozenset] = {}
    for env in live:
        for name, sites in env.items():
            out[name] = out.get(name, frozenset()) | sites
    return out


class _Reaching:
    def __init__(self, info: FuncInfo, tracked: set[str]):
        self.info = info
        self.tracked = tracked
        self.by_target: dict[int, tuple[str, AssignSite]] = {}
        for name in tracked:
            for site in info.assigns[name]:
                if site.target is not None and site.kind != "comp":
                    self.by_target[id(site.target)] = (name, site)
        self.uses: dict[int, tuple] = {}
        self.loops: list[tuple[list[Env], list[Env]]] = []  # (break envs, continue envs) per enclosing loop

    def run(self) -> dict[int, tuple]:
        params = [*self.info.params, *(n for n in (self.info.vararg, self.info.kwarg) if n)]
        env: Env = {p: frozenset([PARAM]) for p in params if p in self.tracked}
        self.block(self.info.node.body, env)
        return self.uses

    # -- statements --------------------------------------------------------------------------------------
    def block(self, body: list[ast.stmt], env: Env | None) -> Env | None:
        for stmt in body:
            if env is None:
                return None
            env = self.stmt(stmt, env)
        return env

    def stmt(self, s: ast.stmt, env: Env) -> Env | None:
        if isinstance(s, ast.If):
            env = self.expr(s.test, env)
            return _merge([self.block(s.body, dict(env)), self.block(s.orelse, dict(env))])
        if isinstance(s, (ast.For, ast.AsyncFor)):
            env = self.expr(s.iter, env)
            return self.loop(s, env, lambda e: self.bind(s.target, e))
        if isinstance(s, ast.While):
            return self.loop(s, env, lambda e: self.expr(s.test, e), test=s.test)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                env = self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    env = self.bind(item.optional_vars, env)
            return self.block(s.body, env)
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            body_env = self.block(s.body, dict(env))
            anywhere = _merge([env, body_env, self.assigned_in(s.body, env)])  # a handler may start anywhere
            outs = [self.block(s.orelse, dict(body_env)) if body_env is not None else None]
            for handler in s.handlers:
                henv = dict(anywhere)
                if handler.type is not None:
                    henv = self.expr(handler.type, henv)
                henv = self.define(handler, henv)
                outs.append(self.block(handler.body, henv))
            after = _merge(outs)
            if s.finalbody:
                final = self.block(s.finalbody, dict(after if after is not None else anywhere))
                return final if after is not None else None
            return after
        if isinstance(s, ast.Match):
            env = self.expr(s.subject, env)
            outs = [dict(env)]  # no case may match
            for case in s.cases:
                cenv = dict(env)
                for node in ast.walk(case.pattern):
                    if isinstance(node, ast.MatchValue):
                        cenv = self.expr(node.value, cenv)
                    cenv = self.define(node, cenv)
                if case.guard is not None:
                    cenv = self.expr(case.guard, cenv)
                outs.append(self.block(case.body, cenv))
            return _merge(outs)
        if isinstance(s, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(s):
                env = self.expr(child, env)
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            if self.loops:
                self.loops[-1][0 if isinstance(s, ast.Break) else 1].append(env)
            return None
        if isinstance(s, ast.Assign):
            env = self.expr(s.value, env)
            for target in s.targets:
                env = self.bind(target, env)
            return env
        if isinstance(s, ast.AugAssign):
            env = self.expr(s.value, env)
            if isinstance(s.target, ast.Name) and s.target.id in env:
                self.uses[id(s.target)] = _in_source_order(env[s.target.id])
            else:
                env = self.expr(s.target, env)
            return self.bind(s.target, env)
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                return env
            env = self.expr(s.value, env)
            return self.bind(s.target, env)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            for deco in getattr(s, "decorator_list", ()):
                env = self.expr(deco, env)
            return self.define(s, env)
        for child in ast.iter_child_nodes(s):  # Expr, Assert, Delete, Global, Pass, ...
            env = self.expr(child, env)
        return env

    def loop(self, s, env: Env, head, test: ast.expr | None = None) -> Env:
        """Loop bodies run zero or more times: iterate to a fixpoint (sets only grow, so it ends)."""
        entry = env
        while True:
            self.loops.append(([], []))
            start = head(dict(entry))
            end = self.block(s.body, dict(start))
            breaks, continues = self.loops.pop()
            again = _merge([entry, end, *continues])
            if again == entry:
                break
            entry = again
        exit_env = head(dict(entry)) if test is not None else entry
        after = self.block(s.orelse, dict(exit_env))
        return _merge([after, *breaks]) or exit_env

    # -- expressions and bindings ------------------------------------------------------------------------------
    def expr(self, e: ast.AST, env: Env) -> Env:
        """Record the uses in ``e`` (outside nested scopes); walrus targets bind after the expression."""
        stack, walrus = [e], []
        while stack:
            node = stack.pop()
            kind = type(node)  # parsed trees hold the ast classes themselves: no isinstance chain needed
            if kind is ast.Name:  # a store or delete target has no child to visit either
                if type(node.ctx) is ast.Load and node.id in env:
                    self.uses[id(node)] = _in_source_order(env[node.id])
                continue
            if kind is ast.Constant or kind in _NESTED:
                continue
            if kind in _COMPS:
                names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
                stack.append(node.generators[0].iter)  # evaluated in the enclosing scope
                inner = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in names]
                stack.extend(n for n in inner if n is not node.generators[0].iter)
                continue
            if kind is ast.NamedExpr:
                walrus.append(node.target)
                stack.append(node.value)
                continue
            # the children ast.iter_child_nodes gives, without the contexts and operators (cheaper)
            for field in _fields(kind):
                value = getattr(node, field, None)
                if type(value) is list:
                    stack.extend(v for v in value if isinstance(v, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)
        for target in walrus:
            env = self.bind(target, env)
        return env

    def bind(self, target: ast.AST, env: Env) -> Env:
        env = dict(env)
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found = self.by_target.get(id(node))
                if found is not None:
                    env[found[0]] = frozenset([found[1]])
            elif isinstance(node, (ast.Attribute, ast.Subscript)):
                env = self.expr(node.value, env)
                if isinstance(node, ast.Subscript):
                    env = self.expr(node.slice, env)
        return env

    def define(self, node: ast.AST, env: Env) -> Env:
        found = self.by_target.get(id(node))
        if found is None:
            return env
        return {**env, found[0]: frozenset([found[1]])}

    def assigned_in(self, body: list[ast.stmt], env: Env) -> Env:
        """Every assignment anywhere in ``body`` (for handlers, which may start after any statement)."""
        out: dict[str, frozenset] = {}
        for stmt in body:
            for node in ast.walk(stmt):
                found = self.by_target.get(id(node))
                if found is not None:
                    out[found[0]] = out.get(found[0], frozenset()) | {found[1]}
        return out
