# -*- test-case-name: tests.test_targeting,tests.test_targeting_pillar -*-
"""
Target matching, shared by the master (which minions to expect) and the minion
(whether a publication is for it).

Target types (L{TARGET_TYPES}), as in Salt:

  - C{glob} (the default): a shell pattern on the minion id, case-sensitive
    (C{fnmatch.fnmatchcase}; Salt's C{fnmatch.fnmatch} is the same on POSIX).
  - C{pcre}: a regular expression applied with C{re.match} to the id, so it is
    anchored at the start only (C{db} matches C{db1}); add C{$} to anchor the
    end.
  - C{list}: ids named exactly, as a comma-separated string or a list of
    strings; spaces around names are ignored.
  - C{grain}: C{key:value}, where the key may be nested (C{a:b:c}) and the
    value is a glob. Matching follows Salt's C{salt.utils.data.subdict_match}:
    values are compared as C{str(value).lower()} against the lowercased
    pattern, so grain matching is case-insensitive and C{num_cpus:4} matches
    the integer 4; a list-valued grain matches if any element does; a
    dict-valued grain matches if the pattern names one of its keys (or is
    C{*}); deeper keys are tried first (C{a:b:c} is C{a}S{->}C{b} = C{c}, then
    C{a} = C{b:c}); a numeric key indexes a list; C{*:} in key position
    searches every key.
  - C{grain_pcre}: the same, with the value a regular expression applied with
    C{re.match}.
  - C{pillar}, C{pillar_pcre}: the same as C{grain} and C{grain_pcre}, on the
    minion's pillar (Salt's C{pillar_match} and C{pillar_pcre_match}, both
    C{subdict_match}).
  - C{pillar_exact}: as C{pillar}, with the value compared whole, no glob
    (Salt's C{exact_match}; still case-insensitive, as Salt lowercases both
    sides).
  - C{ipcidr}: an IP address or a network in CIDR notation; the minion
    matches if one of the addresses of its C{ipv4} grain (C{ipv6} for an
    IPv6 target) is that address or lies in that network. A network with
    host bits set (C{10.0.0.1/8}) is invalid, as for Salt's
    C{ipaddress.ip_network}.
  - C{compound}: words separated by whitespace (or a list of words):
    C{G@}, C{P@}, C{I@}, C{J@}, C{S@}, C{E@}, C{L@}, C{N@} prefixes
    (grain, grain pcre, pillar, pillar pcre, ipcidr, pcre, list,
    nodegroup), plain words as globs,
    C{and}, C{or}, C{not} and parentheses, which must stand apart as words
    (C{( web* or db* )}), exactly as in Salt. Salt turns the words into a
    Python boolean expression, so C{not} binds tighter than C{and}, which
    binds tighter than C{or}; a C{not} straight after a target means
    C{and not} (C{web* not web1}). A grain or pillar word may choose its
    delimiter with one character before the C{@}: C{G|@a|b}, C{I|@a|b}.
  - C{nodegroup}: a name from the master's C{nodegroups}: a compound string
    or a list of words; C{N@name} inside one refers to another. As in Salt, a
    nodegroup with no operator, no C{*} and no prefixed word is a list of ids
    (C{L@}), or, if some word holds one of C{( [ { \\ ? \\} ] )}, their
    comma-joined regular expression (C{E@}).

The expression is parsed once by L{compileTarget} (a recursive-descent
parser, no C{eval}) into a L{TargetMatcher}. A malformed expression raises
L{TargetError} naming the character offset (0-based) of the problem.

Deliberate differences from Salt, each where Salt silently matches nothing or
something unintended:
  - Malformed targets raise L{TargetError} instead of matching nobody: unknown
    or unsupported prefixes (C{X@}, C{R@}, C{T@}, C{M@}), a grain or pillar
    target without the delimiter, an C{ipcidr} target or C{S@} word that is
    not an address or a network (the error names it), unknown nodegroups,
    nodegroup cycles, invalid regular expressions, C{not not} (a syntax
    error in Salt too) and a parenthesis glued to a word (C{(web*}), which
    Salt takes as a literal glob.
  - C{N@group} is always parenthesised; Salt splices a nodegroup without
    nested groups in unparenthesised, so C{N@g and x} with C{g = "a or b"}
    becomes C{a or b and x} there.
  - In C{grain_pcre} and C{pillar_pcre} the regular expression is compiled
    with C{re.IGNORECASE}
    and applied to the lowercased value; Salt lowercases the pattern itself,
    which turns C{\\D}, C{\\S}, C{\\W} into C{\\d}, C{\\s}, C{\\w}.
  - With a custom delimiter, Salt still uses C{:} inside its recursion into
    dict values and for C{*:}; the chosen delimiter is used throughout here.
  - Master side, a minion whose grains are unknown is included whenever the
    expression may match it (three-valued logic, see L{TargetMatcher.evaluate}).
    Salt includes it in every grain word (greedy) and then computes C{not X}
    as "all minus X", which drops it, so a minion that does match could not
    return. The same holds for pillar words and a minion whose pillar the
    master has not cached (not yet compiled): the master expects it unless
    the rest of the target rules it out, and the minion decides with its own
    pillar.
  - C{ipcidr} compares parsed addresses (C{ipaddress}), where Salt compares
    a single target address as a string with the grain's strings; values of
    the grain that are not addresses are skipped, where Salt's
    C{in_subnet} raises. A string grain is taken as a list of one.
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

TARGET_TYPES = (
    "glob",
    "pcre",
    "list",
    "grain",
    "grain_pcre",
    "pillar",
    "pillar_pcre",
    "pillar_exact",
    "ipcidr",
    "compound",
    "nodegroup",
)

#: The longest regular expression accepted from a user, in characters.
MAX_REGEX_LENGTH = 4096
#: The deepest nesting of parentheses and nodegroups in a compound target.
MAX_DEPTH = 64
#: The most operators and words in a compound target once its nodegroups are
#: expanded (a nodegroup used twice counts twice: matching visits it twice).
MAX_SIZE = 10000

_OPERATORS = frozenset(("and", "or", "not", "(", ")"))
_SUPPORTED_ENGINES = "GPIJSELN"
#: Salt's other engines: range, resource, managing minion.
_UNSUPPORTED_ENGINES = "RTM"
#: The compound engines on grains or pillar, and the target type of each.
_DATA_ENGINES = {"G": "grain", "P": "grain_pcre", "I": "pillar", "J": "pillar_pcre"}
#: Characters that make Salt read an operator-free nodegroup as a regex.
_NODEGROUP_REGEX_CHARS = ("(", "[", "{", "\\", "?", "}", "]", ")")
_ENGINE = re.compile(r"([A-Z])@")
_ENGINE_WITH_DELIMITER = re.compile(r"([GPIJ])([^@\s])@")
_GROUP_TYPE = re.compile(r"[A-Z]@")
_INT_KEY = re.compile(r"[-+]?[0-9]+")
_FLOAT_KEY = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_YAML_CONSTANTS: dict[str, Any] = {
    "true": True,
    "True": True,
    "TRUE": True,
    "false": False,
    "False": False,
    "FALSE": False,
    "null": None,
    "Null": None,
    "NULL": None,
    "~": None,
}

Grains = Mapping[str, Any]
Pillar = Mapping[str, Any]
#: The grains or pillar of a minion that has none (never mutated).
_NO_DATA: Mapping[str, Any] = {}
_Selection = tuple[set[str], set[str]]
#: Shared by selections; sets returned by L{_Node.select} are never mutated.
_EMPTY: set[str] = set()
#: Three-valued truth: C{None} means "unknown: may match".
Truth = bool | None


class TargetError(ValueError):
    """
    Raised for a target expression or type that cannot be matched.

    @ivar position: the 0-based character offset of the problem in
        C{expression}, or C{None} when the problem is not at one place.
    @ivar expression: the text C{position} refers to (the target, or the
        definition of the nodegroup at fault), or C{None}.
    """

    def __init__(
        self, message: str, position: int | None = None, expression: str | None = None
    ) -> None:
        super().__init__(message)
        self.position = position
        self.expression = expression


# Leaves and operators.  Each node has evaluate(minionId, grains, pillar) ->
# Truth, where grains or pillar None means "unknown".


class _Node:
    """
    A node of a compiled target.

    L{evaluate} decides for one minion; L{select} decides for a set of
    minions at once, with set operations, so that an id-only word costs one
    pass in C and a grain or pillar word is only tried on the minions still
    in play. Both use three-valued logic: a grain word on unknown grains,
    and a pillar word on an unknown pillar, is unknown.
    """

    __slots__ = ()
    usesGrains = False
    usesPillar = False
    #: The number of nodes under this one, counting shared ones each time.
    size = 1

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        """
        @param grains: the minion's grains, or C{None} if unknown.
        @param pillar: the minion's pillar, or C{None} if unknown.
        @return: C{True}, C{False}, or C{None} for unknown.
        """
        raise NotImplementedError()

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        """
        @param candidates: the minions to decide for; never mutated.
        @param grainsById: grains of the minions whose grains are known.
        @param pillarById: pillar of the minions whose pillar is known.
        @return: the candidates for which the node is true, and those for
            which it is unknown (disjoint). Neither is to be mutated.
        """
        raise NotImplementedError()


class _Constant(_Node):
    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        return self.value

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        return (candidates if self.value else _EMPTY), _EMPTY

    def __repr__(self) -> str:
        return f"Constant({self.value})"


class _IdRegex(_Node):
    """
    A glob (translated) or regular expression applied to the id.
    """

    __slots__ = ("pattern", "match")

    def __init__(self, pattern: str, compiled: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.match = compiled.match

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        return self.match(minionId) is not None

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        return set(filter(self.match, candidates)), _EMPTY

    def __repr__(self) -> str:
        return f"IdRegex({self.pattern!r})"


class _IdList(_Node):
    __slots__ = ("ids",)

    def __init__(self, ids: Iterable[str]) -> None:
        self.ids = frozenset(ids)

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        return minionId in self.ids

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        return candidates & self.ids, _EMPTY

    def __repr__(self) -> str:
        return f"IdList({sorted(self.ids)!r})"


class _DataWord(_Node):
    """
    A word on a minion's data (grains or pillar): C{match} is given that
    data, and is unknown when the data is.
    """

    __slots__ = ("expr", "match")

    def __init__(self, expr: str, match: Callable[[Any], bool]) -> None:
        self.expr = expr
        self.match = match

    @staticmethod
    def _selectOn(
        candidates: set[str], dataById: Mapping[str, Any], match: Callable[[Any], bool]
    ) -> _Selection:
        true: set[str] = set()
        unknown: set[str] = set()
        get = dataById.get
        for minionId in candidates:
            data = get(minionId)
            if data is None:
                unknown.add(minionId)
            elif match(data):
                true.add(minionId)
        return true, unknown


class _Grain(_DataWord):
    """
    A word on the grains (C{G@}, C{P@}, C{S@}).
    """

    __slots__ = ()
    usesGrains = True

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        if grains is None:
            return None
        return self.match(grains)

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        return self._selectOn(candidates, grainsById, self.match)

    def __repr__(self) -> str:
        return f"Grain({self.expr!r})"


class _Pillar(_DataWord):
    """
    A word on the pillar (C{I@}, C{J@}, and the C{pillar*} target types).
    """

    __slots__ = ()
    usesPillar = True

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        if pillar is None:
            return None
        return self.match(pillar)

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        return self._selectOn(candidates, pillarById, self.match)

    def __repr__(self) -> str:
        return f"Pillar({self.expr!r})"


class _Not(_Node):
    __slots__ = ("child", "usesGrains", "usesPillar", "size")

    def __init__(self, child: _Node) -> None:
        self.child = child
        self.usesGrains = child.usesGrains
        self.usesPillar = child.usesPillar
        self.size = 1 + child.size

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        value = self.child.evaluate(minionId, grains, pillar)
        return None if value is None else not value

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        true, unknown = self.child.select(candidates, grainsById, pillarById)
        return candidates - true - unknown, unknown

    def __repr__(self) -> str:
        return f"Not({self.child!r})"


class _Group(_Node):
    __slots__ = ("children", "usesGrains", "usesPillar", "size")

    def __init__(self, children: list[_Node]) -> None:
        # Words on the id first: they are cheap and narrow the candidates.
        self.children = tuple(sorted(children, key=lambda c: c.usesGrains or c.usesPillar))
        self.usesGrains = any(c.usesGrains for c in children)
        self.usesPillar = any(c.usesPillar for c in children)
        self.size = 1 + sum(c.size for c in children)


class _And(_Group):
    __slots__ = ()

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        true: set[str] = candidates
        unknown: set[str] = _EMPTY
        for child in self.children:
            if not true and not unknown:
                break
            childTrue, childUnknown = child.select(true | unknown, grainsById, pillarById)
            # True and true is true; unknown and (true or unknown) is unknown.
            true, unknown = (
                true & childTrue,
                (true & childUnknown) | (unknown & childTrue) | (unknown & childUnknown),
            )
        return true, unknown

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        result: Truth = True
        for child in self.children:
            value = child.evaluate(minionId, grains, pillar)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    def __repr__(self) -> str:
        return f"And{list(self.children)!r}"


class _Or(_Group):
    __slots__ = ()

    def select(
        self, candidates: set[str], grainsById: Mapping[str, Any], pillarById: Mapping[str, Any]
    ) -> _Selection:
        true: set[str] = _EMPTY
        unknown: set[str] = _EMPTY
        rest = candidates
        for child in self.children:
            if not rest:
                break
            # Only the candidates not yet known to match need asking.
            childTrue, childUnknown = child.select(rest, grainsById, pillarById)
            true = true | childTrue
            unknown = (unknown - childTrue) | childUnknown
            rest = rest - childTrue
        return true, unknown

    def evaluate(self, minionId: str, grains: Any, pillar: Any) -> Truth:
        result: Truth = False
        for child in self.children:
            value = child.evaluate(minionId, grains, pillar)
            if value is True:
                return True
            if value is None:
                result = None
        return result

    def __repr__(self) -> str:
        return f"Or{list(self.children)!r}"


# Grain and pillar matching: salt.utils.data.subdict_match, with the
# expression split and its patterns compiled once.

_MISSING: dict[str, Any] = {}


def _yamlKey(key: str) -> Any:
    """
    The value Salt's C{yamlify_arg} gives a dict key that was not found as a
    string (so C{1} finds an integer key), for the scalars YAML gives.
    """
    if _INT_KEY.fullmatch(key):
        return int(key)
    if _FLOAT_KEY.fullmatch(key):
        return float(key)
    return _YAML_CONSTANTS.get(key, key)


def _traverse(data: Any, keys: Sequence[str]) -> Any:
    """
    Salt's C{traverse_dict_and_list}: follow C{keys} through dicts and lists.

    @return: the value, or L{_MISSING} (an empty dict, as Salt's default).
    """
    ptr = data
    for each in keys:
        if isinstance(ptr, list):
            try:
                idx = int(each)
            except ValueError:
                for embedded in ptr:
                    if isinstance(embedded, dict) and each in embedded:
                        ptr = embedded[each]
                        break
                else:
                    return _MISSING
            else:
                for embedded in ptr:
                    if isinstance(embedded, dict) and idx in embedded:
                        ptr = embedded[idx]
                        break
                else:
                    try:
                        ptr = ptr[idx]
                    except IndexError:
                        return _MISSING
        else:
            try:
                ptr = ptr[each]
            except KeyError:
                loaded = _yamlKey(each)
                if loaded is each:
                    return _MISSING
                try:
                    ptr = ptr[loaded]
                except (KeyError, TypeError):
                    return _MISSING
            except (TypeError, IndexError):
                return _MISSING
    return ptr


class _SubdictMatcher:
    """
    One C{key:...:value} expression, matched against a grains or pillar
    dict exactly as Salt's C{subdict_match} does: values as globs, as
    regular expressions (C{regex}), or compared whole (C{exact}, Salt's
    C{exact_match}; still case-insensitive, as Salt lowercases both sides).
    Patterns met while matching (suffixes of the expression) are compiled
    once and shared through C{cache}.
    """

    __slots__ = ("steps", "regex", "exact", "delimiter", "wildcard", "cache")

    def __init__(
        self,
        expr: str,
        delimiter: str,
        regex: bool,
        cache: dict[Any, Any] | None = None,
        exact: bool = False,
    ) -> None:
        self.regex = regex
        self.exact = exact
        self.delimiter = delimiter
        self.wildcard = "*" + delimiter
        self.cache = {} if cache is None else cache
        splits = expr.split(delimiter)
        steps: list[tuple[list[str] | None, str]] = []
        # Deeper keys first: with a:b:c, try a->b == c, then a == b:c.
        for idx in range(len(splits) - 1, 0, -1):
            if splits[:idx] == ["*"]:
                steps.append((None, expr))
            else:
                steps.append((splits[:idx], delimiter.join(splits[idx:])))
        self.steps = steps

    def _valueMatcher(self, pattern: str) -> Callable[[str], Any] | None:
        key = ("value", pattern)
        try:
            return self.cache[key]
        except KeyError:
            pass
        matcher: Callable[[str], Any] | None
        if self.regex:
            try:
                matcher = re.compile(pattern, re.IGNORECASE).match
            except (re.error, RecursionError, OverflowError):
                matcher = None  # Salt logs and treats it as no match.
        elif self.exact:
            matcher = re.compile(re.escape(pattern.lower()) + r"\Z").match
        else:
            matcher = re.compile(fnmatch.translate(pattern.lower())).match
        self.cache[key] = matcher
        return matcher

    def _sub(self, pattern: str) -> _SubdictMatcher:
        key = ("sub", pattern)
        try:
            return self.cache[key]
        except KeyError:
            sub = self.cache[key] = _SubdictMatcher(
                pattern, self.delimiter, self.regex, self.cache, self.exact
            )
            return sub

    def _matchValue(self, target: Any, pattern: str) -> bool:
        matcher = self._valueMatcher(pattern)
        if matcher is None:
            return False
        return matcher(str(target).lower()) is not None

    def _matchDict(self, target: dict[Any, Any], pattern: str) -> bool:
        wildcard = pattern.startswith(self.wildcard)
        if wildcard:
            pattern = pattern[len(self.wildcard) :]
        if pattern == "*":
            # Only checking that the key exists.
            return True
        if pattern in target:
            return True
        if self._sub(pattern).match(target):
            return True
        if wildcard:
            for value in target.values():
                if isinstance(value, dict):
                    if self._matchDict(value, pattern):
                        return True
                elif isinstance(value, list):
                    for item in value:
                        if self._matchValue(item, pattern):
                            return True
                elif self._matchValue(value, pattern):
                    return True
        return False

    def match(self, data: Any) -> bool:
        """
        @return: whether the expression matches C{data} (grains or pillar).
        """
        for keys, pattern in self.steps:
            found = data if keys is None else _traverse(data, keys)
            if isinstance(found, dict):
                if found and self._matchDict(found, pattern):
                    return True
            elif isinstance(found, list | tuple):
                for member in found:
                    if isinstance(member, dict) and self._matchDict(member, pattern):
                        return True
                    if self._matchValue(member, pattern):
                        return True
            elif self._matchValue(found, pattern):
                return True
        return False


# Compiling leaves.


def _tooLong(what: str, pattern: str, offset: int, source: str) -> TargetError:
    return TargetError(
        f"{what}: regular expression {pattern[:40] + '...'!r} at position {offset} is"
        f" {len(pattern)} characters long; the limit is {MAX_REGEX_LENGTH}",
        offset,
        source,
    )


def _compileRegex(pattern: str, what: str, offset: int, source: str) -> re.Pattern[str]:
    """
    Compile a regular expression supplied by a user.

    @param offset: where C{pattern} starts in C{source}, for the error.
    """
    if len(pattern) > MAX_REGEX_LENGTH:
        raise _tooLong(what, pattern, offset, source)
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        detail = getattr(e, "msg", None) or "too complex"
        position = offset + (getattr(e, "pos", None) or 0)
        raise TargetError(
            f"{what}: invalid regular expression {pattern!r} at position {position}: {detail}",
            position,
            source,
        ) from e


def _compileSubdict(
    expr: str, delimiter: str, kind: str, what: str, offset: int | None, source: str
) -> _DataWord:
    """
    Compile a word on the grains or the pillar.

    @param kind: C{grain}, C{grain_pcre}, C{pillar}, C{pillar_pcre} or
        C{pillar_exact}.
    """
    data = "pillar" if kind.startswith("pillar") else "grain"
    regex = kind.endswith("_pcre")
    if not delimiter:
        raise TargetError(f"{what}: the {data} delimiter must not be empty")
    where = "" if offset is None else f" at position {offset}"
    if delimiter not in expr:
        raise TargetError(
            f"{what}: {data} target {expr!r}{where} needs a key and a value"
            f" separated by {delimiter!r}",
            offset,
            source,
        )
    if regex:
        if len(expr) > MAX_REGEX_LENGTH:
            raise _tooLong(what, expr, offset or 0, source)
        # Salt tries each split into key and value; report an error only if
        # no value part is a valid regex (as in P@key:(a|b:c), where "c)" is
        # not, others can be).
        valueStart = expr.index(delimiter) + len(delimiter)
        pattern = expr[valueStart:]
        first: re.error | None = None
        ok = False
        start = 0
        while True:
            found = expr.find(delimiter, start)
            if found < 0:
                break
            start = found + len(delimiter)
            try:
                re.compile(expr[start:], re.IGNORECASE)
            except (re.error, RecursionError, OverflowError) as e:
                if first is None and isinstance(e, re.error):
                    first = e
                continue
            ok = True
            break
        if not ok:
            detail = first.msg if first is not None else "too complex"
            errorAt = (first.pos or 0) if first is not None else 0
            pos = (offset or 0) + valueStart + errorAt
            raise TargetError(
                f"{what}: invalid regular expression {pattern!r} at position {pos}: {detail}",
                pos,
                source,
            )
    matcher = _SubdictMatcher(expr, delimiter, regex, exact=kind == "pillar_exact")
    if data == "pillar":
        return _Pillar(expr, matcher.match)
    return _Grain(expr, matcher.match)


@functools.lru_cache(maxsize=65536)
def _parseAddress(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """
    An address from a minion's C{ipv4} or C{ipv6} grain (the same few
    thousand strings come back with every selection), or L{None} if it is
    not one.
    """
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class _IpMatch:
    """
    Salt's C{ipcidr} matcher: whether one of the minion's C{ipv4} (or, for
    an IPv6 target, C{ipv6}) grain addresses is the target address or lies
    in the target network.
    """

    __slots__ = ("grain", "address", "network")

    def __init__(
        self,
        target: ipaddress.IPv4Address
        | ipaddress.IPv6Address
        | ipaddress.IPv4Network
        | ipaddress.IPv6Network,
    ) -> None:
        self.grain = f"ipv{target.version}"
        self.address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
        self.network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
        if isinstance(target, ipaddress.IPv4Network | ipaddress.IPv6Network):
            self.network = target
        else:
            self.address = target

    def __call__(self, grains: Any) -> bool:
        try:
            values = grains.get(self.grain)
        except AttributeError:
            return False
        if isinstance(values, str):
            values = [values]
        elif not isinstance(values, list | tuple):
            return False
        for value in values:
            if not isinstance(value, str):
                continue
            address = _parseAddress(value)
            if address is None:
                continue
            if self.network is None:
                if address == self.address:
                    return True
            elif address in self.network:
                return True
        return False


def _compileIpCidr(expr: str, what: str, offset: int | None, source: str) -> _Grain:
    """
    Compile an C{ipcidr} target or C{S@} word: an IP address or a network
    in CIDR notation (host bits must be zero, as Salt's C{ip_network}
    requires).
    """
    target: Any
    try:
        target = ipaddress.ip_address(expr)
    except ValueError:
        try:
            target = ipaddress.ip_network(expr)
        except ValueError as e:
            where = "" if offset is None else f" at position {offset}"
            raise TargetError(
                f"{what}: invalid IP address or CIDR network {expr!r}{where}: {e}",
                offset,
                source,
            ) from None
    return _Grain(expr, _IpMatch(target))


def _globNode(pattern: str) -> _Node:
    if pattern == "*":
        return _Constant(True)
    return _IdRegex(pattern, _globRegex(pattern))


@functools.lru_cache(maxsize=1024)
def _globRegex(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def _listItems(tgt: object) -> list[str]:
    if isinstance(tgt, str):
        items = [item.strip() for item in tgt.split(",")]
    elif isinstance(tgt, list | tuple) and all(isinstance(item, str) for item in tgt):
        items = [item.strip() for item in tgt]
    else:
        raise TargetError("a list target is a comma-separated string or a list of strings")
    return [item for item in items if item]


# The compound parser.

_Token = tuple[str, int]


def _tokenize(expr: str | Sequence[str]) -> tuple[list[_Token], str]:
    """
    Split a compound target into words with their offsets.

    @return: the tokens and the text their offsets refer to (for a list of
        words, the words joined by single spaces).
    """
    if isinstance(expr, str):
        return [(m.group(), m.start()) for m in re.finditer(r"\S+", expr)], expr
    tokens = []
    offset = 0
    for word in expr:
        tokens.append((word, offset))
        offset += len(word) + 1
    return tokens, " ".join(expr)


class _Parser:
    """
    A recursive-descent parser for compound targets::

        expr    := andExpr ("or" andExpr)*
        andExpr := unary (("and" | before "not") unary)*
        unary   := "not" primary | primary
        primary := "(" expr ")" | word
    """

    def __init__(
        self,
        tokens: list[_Token],
        source: str,
        label: str,
        compiler: _Compiler,
        depth: int,
    ) -> None:
        self.tokens = tokens
        self.source = source
        self.label = label
        self.compiler = compiler
        self.depth = depth
        self.index = 0

    def error(self, message: str, position: int | None) -> TargetError:
        return TargetError(f"{self.label}: {message}", position, self.source)

    def peek(self) -> str | None:
        if self.index < len(self.tokens):
            return self.tokens[self.index][0]
        return None

    def parse(self) -> _Node:
        node = self.expr()
        if self.index < len(self.tokens):
            # expr() stops only at an unmatched ")" or at the end.
            pos = self.tokens[self.index][1]
            raise self.error(f"unbalanced ')' at position {pos}", pos)
        return node

    def expr(self) -> _Node:
        children = [self.andExpr()]
        while self.peek() == "or":
            self.index += 1
            children.append(self.andExpr())
        return children[0] if len(children) == 1 else _Or(children)

    def andExpr(self) -> _Node:
        children = [self.unary()]
        while True:
            word = self.peek()
            if word == "and":
                self.index += 1
            elif word != "not":
                # Salt reads "a not b" as "a and not b".
                break
            children.append(self.unary())
        if word is not None and word not in ("or", ")"):
            pos = self.tokens[self.index][1]
            raise self.error(f"missing 'and' or 'or' before {word!r} at position {pos}", pos)
        return children[0] if len(children) == 1 else _And(children)

    def unary(self) -> _Node:
        if self.peek() == "not":
            self.index += 1
            if self.peek() == "not":
                pos = self.tokens[self.index][1]
                raise self.error(f"'not' at position {pos} cannot follow 'not'", pos)
            return _Not(self.primary())
        return self.primary()

    def primary(self) -> _Node:
        if self.index >= len(self.tokens):
            word, pos = self.tokens[self.index - 1]
            if word == "(":
                raise self.error(f"unclosed '(' at position {pos}", pos)
            raise self.error(f"dangling {word!r} at position {pos}", pos)
        word, pos = self.tokens[self.index]
        previous = self.tokens[self.index - 1] if self.index else None
        if word in ("and", "or"):
            raise self.error(f"{word!r} at position {pos} has no left operand", pos)
        if word == ")":
            if previous is None:
                raise self.error(f"unbalanced ')' at position {pos}", pos)
            if previous[0] == "(":
                raise self.error(f"empty parentheses at position {previous[1]}", previous[1])
            raise self.error(f"dangling {previous[0]!r} at position {previous[1]}", previous[1])
        self.index += 1
        if word == "(":
            if self.depth >= MAX_DEPTH:
                raise self.error(f"nested deeper than {MAX_DEPTH} levels at position {pos}", pos)
            self.depth += 1
            node = self.expr()
            self.depth -= 1
            if self.peek() != ")":
                raise self.error(f"unclosed '(' at position {pos}", pos)
            self.index += 1
            return node
        return self.word(word, pos)

    def word(self, word: str, pos: int) -> _Node:
        engine = delimiter = None
        m = _ENGINE_WITH_DELIMITER.match(word) or _ENGINE.match(word)
        if m is not None:
            engine = m.group(1)
            if m.re is _ENGINE_WITH_DELIMITER:
                delimiter = m.group(2)
            pattern = word[m.end() :]
            patternAt = pos + m.end()
            prefix = word[: m.end()]
            if engine in _UNSUPPORTED_ENGINES:
                raise self.error(
                    f"target engine {prefix!r} at position {pos} is not supported"
                    " (supported: G@, P@, I@, J@, S@, E@, L@, N@)",
                    pos,
                )
            if engine not in _SUPPORTED_ENGINES:
                raise self.error(f"unknown target engine {prefix!r} at position {pos}", pos)
            if not pattern:
                raise self.error(f"nothing after {prefix!r} at position {pos}", pos)
        else:
            pattern, patternAt = word, pos
        if engine not in ("E", "P", "J") and (
            (pattern.startswith("(") or pattern.endswith(")"))
            and pattern.count("(") != pattern.count(")")
        ):
            raise self.error(
                f"parentheses must be separated from targets by spaces: {word!r} at position {pos}",
                pos,
            )
        if engine is None:
            return _globNode(word)
        if engine == "E":
            return _IdRegex(pattern, _compileRegex(pattern, self.label, patternAt, self.source))
        if engine == "L":
            items = _listItems(pattern)
            if not items:
                raise self.error(f"list at position {pos} names no minion", pos)
            return _IdList(items)
        if engine in _DATA_ENGINES:
            return _compileSubdict(
                pattern,
                delimiter or ":",
                _DATA_ENGINES[engine],
                self.label,
                patternAt,
                self.source,
            )
        if engine == "S":
            return _compileIpCidr(pattern, self.label, patternAt, self.source)
        # N@
        return self.compiler.nodegroup(pattern, self.label, pos, self.source, self.depth)


class _Compiler:
    """
    Compiles compound expressions and nodegroups, remembering each
    nodegroup's tree so that one referenced many times is parsed once.
    """

    def __init__(self, nodegroups: Mapping[str, Any] | None) -> None:
        self.nodegroups = nodegroups
        self.compiled: dict[str, _Node] = {}
        self.stack: list[str] = []

    def compound(self, expr: object, label: str, depth: int = 0) -> _Node:
        if isinstance(expr, list | tuple):
            if not all(isinstance(w, str) for w in expr):
                raise TargetError(f"{label}: a list of words must hold only strings")
            words: str | list[str] = [w for w in expr if w.strip()]
        elif isinstance(expr, str):
            words = expr
        else:
            raise TargetError(f"{label}: a compound target is a string or a list of words")
        tokens, source = _tokenize(words)
        if not tokens:
            raise TargetError(f"{label}: empty expression", None, source)
        node = _Parser(tokens, source, label, self, depth).parse()
        if node.size > MAX_SIZE:
            raise TargetError(
                f"{label}: more than {MAX_SIZE} words and operators once nodegroups are expanded",
                None,
                source,
            )
        return node

    def nodegroup(
        self,
        name: str,
        label: str = "nodegroup target",
        position: int | None = None,
        source: str | None = None,
        depth: int = 0,
    ) -> _Node:
        where = "" if position is None else f" at position {position}"
        if name in self.stack:
            cycle = " -> ".join([*self.stack[self.stack.index(name) :], name])
            raise TargetError(f"{label}: nodegroup cycle{where}: {cycle}", position, source)
        if name in self.compiled:
            return self.compiled[name]
        words = _nodegroupWords(name, self.nodegroups, label, where, position, source)
        if depth >= MAX_DEPTH:
            raise TargetError(
                f"{label}: nodegroups nested deeper than {MAX_DEPTH} levels{where}",
                position,
                source,
            )
        self.stack.append(name)
        try:
            node = self.compound(words, f"nodegroup {name!r}", depth + 1)
        finally:
            self.stack.pop()
        self.compiled[name] = node
        return node


def _nodegroupWords(
    name: str,
    nodegroups: Mapping[str, Any] | None,
    label: str,
    where: str,
    position: int | None,
    source: str | None,
) -> list[str]:
    """
    The words of nodegroup C{name} as Salt reads them (L{expandNodegroup}
    without expanding the C{N@} words).
    """
    if not nodegroups or name not in nodegroups:
        names = sorted(map(str, nodegroups or ()))
        defined = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") or "none"
        raise TargetError(
            f"{label}: unknown nodegroup {name!r}{where} (defined: {defined})", position, source
        )
    definition = nodegroups[name]
    if isinstance(definition, str):
        words = definition.split()
    elif isinstance(definition, list | tuple):
        words = [w if isinstance(w, str) else str(w) for w in definition]
        words = [w for w in words if w.strip()]
    else:
        raise TargetError(
            f"{label}: nodegroup {name!r} is {type(definition).__name__}, not a string or a list",
            position,
            source,
        )
    if not words:
        raise TargetError(f"{label}: nodegroup {name!r} is empty", position, source)
    if not any(w in _OPERATORS for w in words) and not any(
        "*" in w or _GROUP_TYPE.match(w) for w in words
    ):
        if any(c in w for w in words for c in _NODEGROUP_REGEX_CHARS):
            return ["E@" + ",".join(words)]
        return ["L@" + ",".join(words)]
    return words


# The public API.


class TargetMatcher:
    """
    A compiled target: parse once, match many minions.

    @ivar tgt: the target as given.
    @ivar tgtType: its type, one of L{TARGET_TYPES}.
    @ivar usesGrains: whether matching depends on grains at all.
    @ivar usesPillar: whether matching depends on the pillar at all (the
        master then needs its pillar cache).
    """

    def __init__(self, tgt: object, tgtType: str, node: _Node) -> None:
        self.tgt = tgt
        self.tgtType = tgtType
        self._node = node
        self.usesGrains = node.usesGrains
        self.usesPillar = node.usesPillar

    def __repr__(self) -> str:
        return f"<TargetMatcher {self.tgtType} {self.tgt!r}: {self._node!r}>"

    def matches(
        self, minionId: str, grains: Grains | None = None, pillar: Pillar | None = None
    ) -> bool:
        """
        Decide for a minion whose grains and pillar are known: the minion's
        own view.

        @param grains: the minion's grains; C{None} means no grains (every
            grain word is false).
        @param pillar: the minion's pillar; C{None} means an empty pillar
            (every pillar word is false).
        """
        # "or": an empty mapping and None both mean no data (and it is the
        # cheapest test on the path of every publication a minion gets).
        return self._node.evaluate(minionId, grains or _NO_DATA, pillar or _NO_DATA) is True

    def evaluate(self, minionId: str, grains: Grains | None, pillar: Pillar | None = None) -> Truth:
        """
        Three-valued matching (Kleene logic): a grain word is C{None},
        "unknown", when C{grains} is C{None}, and a pillar word when
        C{pillar} is C{None}; C{not} unknown is unknown, C{and} is false if
        any part is false, C{or} is true if any part is true, and unknown
        otherwise.

        @return: C{True} or C{False} when the answer does not depend on the
            unknown grains or pillar, else C{None}.
        """
        return self._node.evaluate(minionId, grains, pillar)

    def select(
        self,
        minionIds: Iterable[str],
        grainsById: Mapping[str, Grains | None] | None = None,
        pillarById: Mapping[str, Pillar | None] | None = None,
    ) -> list[str]:
        """
        The minions the master should expect (see L{checkMinions}).

        @param grainsById: each minion's cached grains; a minion absent (or
            mapped to C{None}) has unknown grains.
        @param pillarById: each minion's cached pillar; a minion absent (or
            mapped to C{None}) has an unknown pillar, so a pillar word may
            match it and it is included unless the rest of the target rules
            it out.
        """
        candidates = set(minionIds)
        true, unknown = self._node.select(candidates, grainsById or {}, pillarById or {})
        return sorted(true | unknown)


def compileTarget(
    tgt: object, tgtType: str, nodegroups: Mapping[str, Any] | None = None, delimiter: str = ":"
) -> TargetMatcher:
    """
    Parse and check a target once. Matchers of string targets are kept in a
    small LRU cache (keyed by target, type, delimiter and nodegroups), since a
    minion meets the same few targets again and again; matchers are
    immutable.

    @param tgtType: one of L{TARGET_TYPES}.
    @param nodegroups: the master's C{nodegroups} option, for C{nodegroup}
        targets and C{N@} words.
    @param delimiter: the key delimiter of C{grain} and C{grain_pcre} targets
        (compound words choose theirs as C{G|@a|b}).
    @raise TargetError: naming the problem (and where, for compound targets).
    """
    if not isinstance(tgtType, str) or tgtType not in TARGET_TYPES:
        raise TargetError(f"unknown target type {tgtType!r}; supported: {', '.join(TARGET_TYPES)}")
    if not isinstance(delimiter, str):
        raise TargetError(f"{tgtType} target: the delimiter must be a string")
    if isinstance(tgt, str):
        # A minion meets the same few targets again and again.
        frozen = _freezeNodegroups(nodegroups)
        if frozen is not None:
            return _compileCached(tgt, tgtType, delimiter, frozen)
    return _compile(tgt, tgtType, nodegroups, delimiter)


def _freezeNodegroups(nodegroups: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """
    A hashable copy of C{nodegroups} to key the cache of compiled targets,
    or C{None} if it holds something unhashable.
    """
    if not nodegroups:
        return ()
    frozen = []
    try:
        for name, definition in nodegroups.items():
            if isinstance(definition, list | tuple):
                definition = ("list", *definition)
            hash(definition)
            frozen.append((name, definition))
        return tuple(sorted(frozen, key=lambda item: str(item[0])))
    except (TypeError, AttributeError):
        return None


def _thawNodegroups(frozen: tuple[Any, ...]) -> dict[Any, Any]:
    return {
        name: list(definition[1:]) if isinstance(definition, tuple) else definition
        for name, definition in frozen
    }


@functools.lru_cache(maxsize=512)
def _compileCached(
    tgt: str, tgtType: str, delimiter: str, nodegroups: tuple[Any, ...]
) -> TargetMatcher:
    return _compile(tgt, tgtType, _thawNodegroups(nodegroups), delimiter)


def _compile(
    tgt: object, tgtType: str, nodegroups: Mapping[str, Any] | None, delimiter: str
) -> TargetMatcher:
    node: _Node
    if tgtType == "list":
        items = _listItems(tgt)
        if not items:
            raise TargetError("a list target must name at least one minion")
        node = _IdList(items)
    elif tgtType == "compound":
        node = _Compiler(nodegroups).compound(tgt, "compound target")
    elif tgtType == "nodegroup":
        if not isinstance(tgt, str) or not tgt:
            raise TargetError("a nodegroup target must be a nodegroup name")
        node = _Compiler(nodegroups).nodegroup(tgt)
    else:
        if not isinstance(tgt, str) or not tgt:
            raise TargetError(f"a {tgtType} target must be a non-empty string")
        if tgtType == "glob":
            node = _globNode(tgt)
        elif tgtType == "pcre":
            node = _IdRegex(tgt, _compileRegex(tgt, "pcre target", 0, tgt))
        elif tgtType == "ipcidr":
            node = _compileIpCidr(tgt, "ipcidr target", None, tgt)
        else:
            node = _compileSubdict(tgt, delimiter, tgtType, f"{tgtType} target", None, tgt)
    return TargetMatcher(tgt, tgtType, node)


def validateTarget(
    tgt: object, tgtType: str, nodegroups: Mapping[str, Any] | None = None, delimiter: str = ":"
) -> None:
    """
    @raise TargetError: naming the problem, if C{tgt} is not a valid target of
        type C{tgtType}; for a malformed compound target the message names the
        0-based character offset (also in L{TargetError.position}).
    """
    compileTarget(tgt, tgtType, nodegroups, delimiter)


def matchMinion(
    minionId: str,
    tgt: object,
    tgtType: str = "glob",
    grains: Grains | None = None,
    nodegroups: Mapping[str, Any] | None = None,
    delimiter: str = ":",
    pillar: Pillar | None = None,
) -> bool:
    """
    Whether the minion C{minionId}, whose grains are C{grains} and pillar
    C{pillar}, is targeted: the minion's decision about a publication.

    @param grains: the minion's own grains; C{None} is taken as no grains, so
        grain words are false.
    @param pillar: the minion's own pillar; C{None} is taken as an empty
        pillar, so pillar words are false.
    @raise TargetError: if the target is invalid.
    """
    return compileTarget(tgt, tgtType, nodegroups, delimiter).matches(minionId, grains, pillar)


def checkMinions(
    minionIds: Iterable[str],
    tgt: object,
    tgtType: str = "glob",
    grainsById: Mapping[str, Grains | None] | None = None,
    nodegroups: Mapping[str, Any] | None = None,
    delimiter: str = ":",
    pillarById: Mapping[str, Pillar | None] | None = None,
) -> list[str]:
    """
    The minions the master should expect to return, among C{minionIds}.

    The target is parsed once. A minion whose grains are unknown (absent from
    C{grainsById}, or mapped to C{None}; every minion when C{grainsById} is
    C{None}) is included whenever the target may match it whatever its
    grains are, as Salt's greedy matching does, because a minion that runs a
    job the master does not expect cannot return: C{G@os:Debian} includes it,
    and so does C{not G@os:Debian}, while C{G@os:Debian and db*} includes it
    only if its id matches C{db*}. With every minion's grains known, the
    result is exactly the minions for which L{matchMinion} is true. Pillar
    words are decided the same way from C{pillarById}: a minion whose
    pillar the master has not cached may match them.

    @param grainsById: each minion's cached grains.
    @param pillarById: each minion's cached pillar (the master's pillar
        cache); L{None} when none is known.
    @return: the sorted, distinct ids.
    @raise TargetError: if the target is invalid.
    """
    return compileTarget(tgt, tgtType, nodegroups, delimiter).select(
        minionIds, grainsById, pillarById
    )


def expandNodegroup(name: str, nodegroups: Mapping[str, Any] | None) -> list[str]:
    """
    Rewrite a nodegroup as the words of an equivalent compound target, for a
    master publishing to minions that do not know the nodegroups (Salt's
    C{LocalClient} publishes C{-N} targets this way). Each C{N@} reference is
    replaced by its words in parentheses.

    @raise TargetError: if the nodegroup or one it references is invalid.
    """
    compileTarget(name, "nodegroup", nodegroups)

    def words(group: str) -> list[str]:
        out: list[str] = []
        for word in _nodegroupWords(group, nodegroups, "nodegroup target", "", None, None):
            m = _ENGINE.match(word)
            if m is not None and m.group(1) == "N":
                out.extend(["(", *words(word[m.end() :]), ")"])
            else:
                out.append(word)
        return out

    return words(name)
