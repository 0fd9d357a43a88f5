"""queries/*.sql (DuckDB dialect) as Spark SQL: sqlglot transpiles, after a few rewrites of the DuckDB forms
our files use that sqlglot leaves as they are or maps to something Spark computes differently. Stars (`*`,
`* exclude`, `* replace`, `union all by name`) are expanded against the session's schemas first, since Spark
SQL has none of those forms. A file this cannot carry over is a `NotPortable` naming it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from attribution.errors import AttributionError
from attribution.labels import MACROS

Columns = Callable[[str], Mapping[str, str]]  # a relation's columns and their types (as Spark names them)


class NotPortable(AttributionError):
    """A query file uses DuckDB SQL with no Spark translation here (exit 1: please report)."""


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _macro(name: str) -> Callable[[exp.Expr], exp.Expr]:
    # attribution.labels' macro `name`, inlined (Spark has no macros): its body with the call's arguments for
    # its parameters, rewritten as the rest of the file is
    params, body = MACROS[name]

    def inline(node: exp.Expr) -> exp.Expr:
        if len(node.expressions) != len(params):
            raise NotPortable(f"{name}() takes {len(params)} arguments")
        args = dict(zip(params, node.expressions, strict=True))
        tree = sqlglot.parse_one(body, read="duckdb")
        tree = tree.transform(lambda n: args[n.name].copy() if isinstance(n, exp.Column) and not n.table
                              and n.name in args else n)
        return tree.transform(_rewrite)

    return inline


def _utc(zone: exp.Expr, ts: exp.Expr) -> exp.Expr:
    # timezone('UTC', instant): the session's zone is UTC (attribution.spark.session), where the instant
    # reads as its UTC wall time already
    if not (isinstance(zone, exp.Literal) and zone.this == "UTC"):
        raise NotPortable(f"timezone({zone.sql()}, ...)")
    return ts


_INTEGERS = {exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT, exp.DataType.Type.TINYINT}

# DuckDB functions (as sqlglot parses them: Anonymous, by lower-case name) and their Spark forms
_ANONYMOUS: dict[str, Callable[[exp.Expr], exp.Expr]] = {
    **{name: _macro(name) for name in MACROS},
    "epoch_us": lambda n: _fn("unix_micros", n.expressions[0]),
    "epoch_ms": lambda n: _fn("unix_millis", n.expressions[0]),
    "list_position": lambda n: _fn("array_position", *n.expressions),
    "timezone": lambda n: _utc(*n.expressions),
    # to_microseconds(n): an interval of n microseconds (added to a timestamp), exact in DECIMAL seconds
    "to_microseconds": lambda n: sqlglot.parse_one(
        f"make_dt_interval(0, 0, 0, cast(cast({n.expressions[0].transform(_rewrite).sql('spark')} as decimal(20, 0)) / 1000000 "
        "as decimal(18, 6)))", read="spark"),
}


def _rewrite(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Anonymous) and (fix := _ANONYMOUS.get(str(node.this).lower())):
        return fix(node)
    if isinstance(node, exp.PercentileCont) or (isinstance(node, exp.Quantile)):
        return _quantile(node)
    if isinstance(node, exp.TimeToUnix):
        # epoch(): seconds, with the fraction, of an instant or of the interval between two
        arg = node.this
        micros = (exp.Sub(this=_fn("unix_micros", arg.this), expression=_fn("unix_micros", arg.expression))
                  if isinstance(arg, exp.Sub) else _fn("unix_micros", arg))
        return exp.Div(this=exp.Paren(this=micros), expression=exp.Literal.number("1e6"))
    if isinstance(node, exp.PercentileDisc):
        raise NotPortable("quantile_disc")
    if (isinstance(node, exp.Cast) and node.to.this in _INTEGERS
            and isinstance(node.this.unnest(), exp.Mul | exp.Div | exp.Add | exp.Sub)):
        # (arithmetic)::bigint: DuckDB rounds a double to the nearest integer (half to even), Spark's cast
        # truncates
        return exp.Cast(this=_fn("bround", node.this.unnest().transform(_rewrite)), to=node.to)
    if isinstance(node, exp.Length) and (isinstance(node.this, exp.ArrayFilter | exp.Array) or _is_list(node.this)):
        # len(list): Spark's length() is for strings, size() for arrays
        return _fn("size", node.this.transform(_rewrite))
    if isinstance(node, exp.GroupConcat) or (isinstance(node, exp.Filter) and isinstance(node.this, exp.GroupConcat)):
        return _distinct_string_agg(node)
    if isinstance(node, exp.DateBin):
        return _date_bin(node)
    if isinstance(node, exp.Ordered) and isinstance(node.parent, exp.Distribute):
        # `distribute by x` (a Spark block's partitioning): DuckDB's reader gives each key a null order,
        # which Spark's grammar has no place for there
        return node.this
    if isinstance(node, exp.UnixToTime) and not (node.args.get("scale") or node.args.get("format")):
        # to_timestamp(seconds): sqlglot's from_unixtime formats to whole seconds; timestamp_seconds keeps
        # the fraction, as DuckDB does
        return _fn("timestamp_seconds", node.this)
    return node


# quantile_cont(x, q) over the group's values sorted once (`x_` stands for x, `q_` for q, as doubles as
# `percentile` takes them): at the rank h = (n - 1) * p, the values a and b at floor(h) and ceil(h), and
# a + (h - floor(h)) * (b - a) as Spark's `percentile` interpolates (a itself where a = b or h is whole), so
# the same doubles; NULL over no value
_INTERPOLATED = """case when floor((size(_qs) - 1) * _qp) = ceil((size(_qs) - 1) * _qp)
        or get(_qs, cast(floor((size(_qs) - 1) * _qp) as int)) = get(_qs, cast(ceil((size(_qs) - 1) * _qp) as int))
    then get(_qs, cast(floor((size(_qs) - 1) * _qp) as int))
    else get(_qs, cast(floor((size(_qs) - 1) * _qp) as int)) + ((size(_qs) - 1) * _qp - floor((size(_qs) - 1) * _qp))
        * (get(_qs, cast(ceil((size(_qs) - 1) * _qp) as int)) - get(_qs, cast(floor((size(_qs) - 1) * _qp) as int))) end"""
_SORTED_QUANTILES = {
    False: f"get(transform(array(array_sort(collect_list(cast(x_ as double)))), _qs -> case when size(_qs) > 0 then "
           f"get(transform(array(cast(q_ as double)), _qp -> {_INTERPOLATED}), 0) end), 0)",
    True: f"get(transform(array(array_sort(collect_list(cast(x_ as double)))), _qs -> case when size(_qs) > 0 then "
          f"transform(cast(q_ as array<double>), _qp -> {_INTERPOLATED}) end), 0)",
}


def _quantile(node: exp.Expr) -> exp.Expr:
    """quantile_cont(x, q) (q a fraction or a list of them): exact, as DuckDB's (linear interpolation between
    the two nearest ranks). Spark's `percentile` keeps a hash map of boxed values per group, whose garbage
    cost most of `latency_exact_by_deployment_model` at 1M (~125 groups: 11 s of tasks, 64 s of their time in
    GC); the values collected and sorted once per group give the same doubles in half of that (a little more
    than the map where a few large groups repeat values: bench/scale/README.md). Under a FILTER or OVER clause
    (which belong to one aggregate call) it stays `percentile`."""
    x, q = node.this.transform(_rewrite), node.expression.transform(_rewrite)
    listed = isinstance(q, exp.Array) or (isinstance(q, exp.Cast) and q.to.is_type(exp.DataType.Type.ARRAY))
    if isinstance(node.parent, exp.Filter | exp.Window) or not (listed or isinstance(q, exp.Literal)):
        return _fn("percentile", x, q)
    tree = sqlglot.parse_one(_SORTED_QUANTILES[listed], read="spark")
    return tree.transform(lambda n: {"x_": x, "q_": q}[n.name].copy() if isinstance(n, exp.Column)
                          and n.name in ("x_", "q_") else n)


def _is_list(node: exp.Expr) -> bool:
    # the type annotate_types gave (to_spark annotates a tree that has len())
    return node.type is not None and node.type.is_type(exp.DataType.Type.ARRAY)


def _subscripts(tree: exp.Expr) -> exp.Expr:
    """`unnest(x) as v, generate_subscripts(x, 1) as i` in one select (DuckDB unnests the two in step): one
    Spark generator over x's (value, 1-based index) pairs, since Spark allows one generator per select."""
    for select in list(tree.find_all(exp.Select)):
        for sub in [p for p in select.expressions if isinstance(p.unalias(), exp.Anonymous)
                    and str(p.unalias().this).lower() == "generate_subscripts"]:
            arr = sub.unalias().expressions[0]
            values = [p for p in select.expressions if isinstance(p.unalias(), exp.Explode) and p.unalias().this == arr]
            if len(values) != 1 or sub.unalias().expressions[1:] != [exp.Literal.number(1)]:
                raise NotPortable("generate_subscripts (only beside `unnest` of the same list, dimension 1)")
            value = values[0]
            fields = sorted([(select.expressions.index(value), value.alias_or_name, "_v"),
                             (select.expressions.index(sub), sub.alias_or_name, "_i + 1")])
            pairs = ", ".join(f"'{name}', {expr}" for _, name, expr in fields)
            gen = sqlglot.parse_one(f"inline(transform({arr.sql('spark')}, (_v, _i) -> named_struct({pairs})))",
                                    read="spark")
            first, second = sorted([value, sub], key=select.expressions.index)
            first.replace(gen)
            second.pop()
    return tree


def _distinct_string_agg(node: exp.Expr) -> exp.Expr:
    # string_agg(distinct x, sep order by x) [filter (where c)]: the sorted set joined, NULL over no value, as
    # DuckDB gives (Spark's listagg with distinct, order and filter fails in its planner)
    agg, where = (node.this, node.expression) if isinstance(node, exp.Filter) else (node, None)
    order, sep = agg.this, agg.args.get("separator")
    if not (isinstance(order, exp.Order) and isinstance(order.this, exp.Distinct) and sep is not None
            and len(order.this.expressions) == 1 and len(order.expressions) == 1
            and order.expressions[0].this == order.this.expressions[0] and not order.expressions[0].args.get("desc")):
        raise NotPortable("string_agg (only `string_agg(distinct x, sep order by x)`)")
    value = order.this.expressions[0].sql("spark")
    filtered = f" filter (where {where.this.sql('spark')})" if where is not None else ""
    items = f"collect_set({value}){filtered}"
    return sqlglot.parse_one(f"case when size({items}) = 0 then null else array_join(array_sort({items}), "
                             f"{sep.sql('spark')}) end", read="spark")


def _date_bin(node: exp.DateBin) -> exp.Expr:
    # time_bucket(interval 1 <unit>, ts): DuckDB's origin (2000-01-03 00:00 UTC) sits on every second, minute
    # and hour boundary, so one such unit is Spark's date_trunc in the UTC session; other widths or origins
    # have no form here
    width, origin = node.this, node.args.get("origin") or node.args.get("zone")
    unit = width.text("unit").lower() if isinstance(width, exp.Interval) else ""
    if origin is not None or unit not in ("second", "minute", "hour") or width.name != "1":
        raise NotPortable(f"time_bucket({width.sql('duckdb')}, ...) (one second, minute or hour only)")
    return _fn("date_trunc", exp.Literal.string(unit), node.expression.transform(_rewrite))


def _inline_windows(tree: exp.Expr) -> exp.Expr:
    """`over (g order by x)` with `window g as (partition by ...)`: Spark refers to a named window only as a
    whole, so each use gets the definition written out."""
    for select in list(tree.find_all(exp.Select)):
        named = {w.this.name: w for w in select.args.get("windows") or []}
        if not named:
            continue
        for use in select.find_all(exp.Window):
            ref = use.args.get("alias")
            if ref is None or ref.name not in named:
                continue
            base = named[ref.name]
            for key in ("partition_by", "order", "spec"):
                if not use.args.get(key) and base.args.get(key):
                    use.set(key, base.args[key].copy() if isinstance(base.args[key], exp.Expression)
                            else [e.copy() for e in base.args[key]])
            use.set("alias", None)
        select.set("windows", None)
    return tree


def _names(node: exp.Query) -> list[str]:
    return [s.alias_or_name for s in node.selects]


def _by_name(node: exp.Expr) -> exp.Expr:
    """`a union all by name b` (stars already expanded): b's columns put in a's order, NULL for a column b
    lacks; a column only b has is added to a as NULL."""
    if not (isinstance(node, exp.Union) and node.args.get("by_name")):
        return node
    left, right = node.left, node.right
    lnames, rnames = _names(left), _names(right)
    rmap = {s.alias_or_name: s for s in right.selects}
    for extra in [n for n in rnames if n not in lnames]:
        left.select(exp.alias_(exp.Null(), extra, quoted=True), copy=False)
        lnames.append(extra)
    right.set("expressions", [rmap.get(n) or exp.alias_(exp.Null(), n, quoted=True) for n in lnames])
    node.set("by_name", None)
    return node


def to_spark(sql: str, columns: Columns, name: str = "<sql>") -> str:
    """The Spark SQL text of DuckDB `sql` over relations whose columns `columns(relation)` gives; `$param`
    placeholders become Spark's `:param` named parameters. (A query file's `-- @spark` block, resolved by
    attribution.queries.load, is read the same way: the Spark functions it calls pass through.) The text is a
    function of `sql` and those columns alone: kept for the process (each connection of a process, and each
    analysis on one, transpiles the same files over the same relations)."""
    try:
        tables = _parsed(sql)[1]
        return _text(sql, tuple((t, tuple(columns(t).items())) for t in tables))
    except NotPortable as exc:
        raise NotPortable(f"queries/{name}.sql: no Spark form for {exc} (a bug: please report it)") from None
    except sqlglot.errors.SqlglotError as exc:
        raise NotPortable(f"queries/{name}.sql: sqlglot: {str(exc).splitlines()[0]}") from None


def relations(sql: str) -> tuple[str, ...]:
    """The relations `sql` reads (to_spark has read it: its parse is kept)."""
    return _parsed(sql)[1]


@lru_cache(maxsize=512)
def _parsed(sql: str) -> tuple[exp.Expr, tuple[str, ...]]:
    """`sql` parsed and prepared for qualify (never changed after: _text works on a copy), and the relations
    it reads (its tables that are not its CTEs)."""
    tree = _inline_windows(_pre_unpivot(sqlglot.parse_one(sql, read="duckdb")))
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)  # DuckDB's planner hint; Spark plans each CTE itself
    ctes = {c.alias for c in tree.find_all(exp.CTE)}
    return tree, tuple(dict.fromkeys(t.name for t in tree.find_all(exp.Table) if t.name not in ctes))


@lru_cache(maxsize=2048)
def _text(sql: str, relations: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]) -> str:
    """The Spark text of `sql` over `relations` ((name, ((column, type), ...)), ...)."""
    tree = _parsed(sql)[0].copy()
    schema: dict[str, object] = {t: dict(cols) for t, cols in relations}
    tree = qualify(tree, schema=schema, dialect="duckdb",
                   quote_identifiers=True, validate_qualify_columns=False, identify=True)
    if tree.find(exp.Length):  # len(): size() of a list, length() of a string, told apart by type
        tree = annotate_types(tree, schema=schema, dialect="duckdb")
    # (the tree is this function's own copy: rewritten in place, not copied again at each pass)
    tree = _subscripts(tree).transform(_rewrite, copy=False).transform(_by_name, copy=False)
    return tree.sql("spark", comments=False)


def _pre_unpivot(tree: exp.Expr) -> exp.Expr:
    """A CTE that is one DuckDB `unpivot (subquery or relation) on ... into name m value v` becomes a
    Spark-shaped `select * from (subquery) unpivot (v for m in (...))` before qualify (which cannot walk
    DuckDB's form)."""
    for node in list(tree.find_all(exp.Pivot)):
        if not node.args.get("unpivot"):
            continue
        into, sub = node.args.get("into"), node.this
        if not (isinstance(sub, exp.Subquery | exp.Table) and node.expressions and into is not None
                and len(into.expressions) == 1):
            raise NotPortable("this unpivot (DuckDB's `unpivot (query) on ... into name m value v` only)")
        names = [c.sql("duckdb") for c in node.expressions]
        metric, value = into.this.name, into.expressions[0].name
        inner = f"({sub.this.sql('duckdb')})" if isinstance(sub, exp.Subquery) else sub.sql("duckdb")
        text = f"select * from {inner} unpivot ({value} for {metric} in ({', '.join(names)}))"
        node.replace(sqlglot.parse_one(text, read="spark"))
    return tree
