"""A small interpreter for the subset of CEL that granary's CRDs use.

It parses each x-kubernetes-validations rule, checks that every field it names exists in the
schema where the rule sits (what the API server's compiler does), and evaluates it against
manifests the way the API server does after defaulting. Unsupported syntax is an error, so a
rule that uses more of CEL than this file knows fails the test instead of passing silently.

Supported: literals (int, string, bool, null, lists), self / oldSelf, field access, has(),
size(), the methods startsWith, endsWith, matches, size, all, exists, exists_one, the
operators ! - && || == != < <= > >= in + and ?:.
"""
import re

TOKEN = re.compile(r"""\s*(?:
    (?P<number>\d+)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op>&&|\|\||==|!=|<=|>=|[-+!<>?:.,()\[\]])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
)""", re.VERBOSE)


class CelError(Exception):
    pass


def tokenize(text):
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise CelError(f"cannot parse at {text[pos:pos + 20]!r}")
        kind = match.lastgroup
        value = match.group(kind)
        if kind == "string":
            value = bytes(value[1:-1], "utf-8").decode("unicode_escape")
        elif kind == "number":
            value = int(value)
        tokens.append((kind, value))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    tokens.append(("end", None))
    return tokens


BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3, "+": 4, "-": 4}
METHODS = {"startsWith", "endsWith", "matches", "size", "all", "exists", "exists_one"}
MACROS = {"all", "exists", "exists_one"}


class Parser:
    def __init__(self, text):
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos]

    def take(self, value=None):
        token = self.tokens[self.pos]
        if value is not None and token[1] != value:
            raise CelError(f"expected {value!r}, found {token[1]!r}")
        self.pos += 1
        return token

    def parse(self):
        expr = self.ternary()
        if self.peek()[0] != "end":
            raise CelError(f"unexpected {self.peek()[1]!r}")
        return expr

    def ternary(self):
        cond = self.binary(1)
        if self.peek()[1] == "?":
            self.take("?")
            yes = self.ternary()
            self.take(":")
            return ("?:", cond, yes, self.ternary())
        return cond

    def binary(self, level):
        left = self.unary()
        while True:
            kind, value = self.peek()
            op = value if kind in ("op", "name") else None
            if op not in BINARY or BINARY[op] < level:
                return left
            self.take()
            left = (op, left, self.binary(BINARY[op] + 1))

    def unary(self):
        if self.peek()[1] in ("!", "-"):
            op = self.take()[1]
            return ("neg" if op == "-" else "!", self.unary())
        return self.postfix(self.primary())

    def primary(self):
        kind, value = self.take()
        if kind in ("number", "string"):
            return ("lit", value)
        if kind == "name":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "null":
                return ("lit", None)
            if value == "has":
                self.take("(")
                arg = self.postfix(self.primary())
                self.take(")")
                if arg[0] != ".":
                    raise CelError("has() takes a field selection such as has(self.x)")
                return ("has", arg)
            if value == "size" and self.peek()[1] == "(":
                self.take("(")
                arg = self.ternary()
                self.take(")")
                return ("size", arg)
            if self.peek()[1] == "(":
                raise CelError(f"unknown function {value}()")
            return ("var", value)
        if value == "(":
            expr = self.ternary()
            self.take(")")
            return expr
        if value == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.ternary())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take("]")
            return ("list", items)
        raise CelError(f"unexpected {value!r}")

    def postfix(self, expr):
        while self.peek()[1] == ".":
            self.take(".")
            kind, name = self.take()
            if kind != "name":
                raise CelError("expected a field or method name after '.'")
            if self.peek()[1] != "(":
                expr = (".", expr, name)
                continue
            if name not in METHODS:
                raise CelError(f"unknown method {name}()")
            self.take("(")
            args = []
            while self.peek()[1] != ")":
                args.append(self.ternary())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take(")")
            if name in MACROS:
                if len(args) != 2 or args[0][0] != "var":
                    raise CelError(f"{name}() takes a variable and an expression")
                expr = ("macro", name, expr, args[0][1], args[1])
            else:
                expr = ("call", name, expr, args)
        return expr


def parse(rule):
    return Parser(rule).parse()


# ---- static checks against the schema ------------------------------------------------------

def check(expr, schema, variables=None):
    """Returns the schema of `expr` where it can be known; raises CelError for unknown fields,
    iteration over unbounded lists and regular expressions over unbounded strings."""
    variables = dict(variables or {}, self=schema, oldSelf=schema)
    return _check(expr, variables)


def _check(expr, variables):
    op = expr[0]
    if op == "lit":
        return None
    if op == "var":
        if expr[1] not in variables:
            raise CelError(f"undeclared reference to '{expr[1]}'")
        return variables[expr[1]]
    if op == ".":
        parent = _check(expr[1], variables)
        if parent is None:
            return None
        if parent.get("x-kubernetes-preserve-unknown-fields"):
            return parent.get("properties", {}).get(expr[2])
        props = parent.get("properties")
        if expr[2] == "metadata" and parent.get("properties", {}).get("metadata") is not None:
            return {"type": "object", "properties": {"name": {"type": "string", "maxLength": 253},
                                                      "generateName": {"type": "string"}}}
        if props is None or expr[2] not in props:
            raise CelError(f"undefined field '{expr[2]}'")
        return props[expr[2]]
    if op == "has":
        _check(expr[1], variables)
        return None
    if op == "macro":
        _, name, target, var, body = expr
        target_schema = _check(target, variables)
        if target_schema is not None:
            if target_schema.get("type") != "array":
                raise CelError(f"{name}() applies to lists")
            if "maxItems" not in target_schema:
                raise CelError(f"{name}() over a list without maxItems exceeds the cost budget")
        _check(body, dict(variables, **{var: (target_schema or {}).get("items")}))
        return None
    if op == "call":
        _, name, target, args = expr
        target_schema = _check(target, variables)
        for arg in args:
            _check(arg, variables)
        if name == "matches" and target_schema is not None and "maxLength" not in target_schema:
            raise CelError("matches() on a string without maxLength exceeds the cost budget")
        return None
    for child in expr[1:]:
        if isinstance(child, tuple):
            _check(child, variables)
        elif isinstance(child, list):
            for item in child:
                _check(item, variables)
    return None


# ---- evaluation ----------------------------------------------------------------------------

_MISSING = object()


def evaluate(expr, variables):
    op = expr[0]
    if op == "lit":
        return expr[1]
    if op == "var":
        return variables[expr[1]]
    if op == "list":
        return [evaluate(e, variables) for e in expr[1]]
    if op == ".":
        parent = evaluate(expr[1], variables)
        if not isinstance(parent, dict) or expr[2] not in parent:
            raise CelError(f"no such key: {expr[2]}")
        return parent[expr[2]]
    if op == "has":
        parent = evaluate(expr[1][1], variables)
        return isinstance(parent, dict) and expr[1][2] in parent
    if op == "size":
        return len(evaluate(expr[1], variables))
    if op == "!":
        return not _bool(evaluate(expr[1], variables))
    if op == "neg":
        return -evaluate(expr[1], variables)
    if op == "?:":
        return evaluate(expr[2] if _bool(evaluate(expr[1], variables)) else expr[3], variables)
    if op == "&&":
        return _bool(evaluate(expr[1], variables)) and _bool(evaluate(expr[2], variables))
    if op == "||":
        return _bool(evaluate(expr[1], variables)) or _bool(evaluate(expr[2], variables))
    if op == "macro":
        _, name, target, var, body = expr
        items = evaluate(target, variables)
        results = [_bool(evaluate(body, dict(variables, **{var: item}))) for item in items]
        return {"all": all, "exists": any}.get(name, lambda r: r.count(True) == 1)(results)
    if op == "call":
        _, name, target, args = expr
        value = evaluate(target, variables)
        values = [evaluate(a, variables) for a in args]
        if name == "startsWith":
            return value.startswith(values[0])
        if name == "endsWith":
            return value.endswith(values[0])
        if name == "matches":
            return re.search(values[0], value) is not None
        if name == "size":
            return len(value)
    left, right = evaluate(expr[1], variables), evaluate(expr[2], variables)
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "in":
        return left in right
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def _bool(value):
    if not isinstance(value, bool):
        raise CelError(f"expected a bool, got {value!r}")
    return value


def uses_old_self(expr):
    if expr == ("var", "oldSelf"):
        return True
    return any(uses_old_self(c) for c in expr[1:] if isinstance(c, tuple)) or any(
        uses_old_self(i) for c in expr[1:] if isinstance(c, list) for i in c if isinstance(i, tuple))
