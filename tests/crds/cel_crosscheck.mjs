// Evaluates CEL rules with @bufbuild/cel, an implementation of CEL independent of cel.py.
// stdin: a JSON list of {rule, self, oldSelf}; stdout: a JSON list of true, false or
// {"error": message}, in the same order. JSON integers become CEL ints, objects CEL maps, as
// the API server binds custom resources.
import { run } from "@bufbuild/cel";

const toCel = (value) => {
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === "object") {
    return new Map(Object.entries(value).map(([k, v]) => [k, toCel(v)]));
  }
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  return value;
};

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = JSON.parse(input).map(({ rule, self, oldSelf }) => {
  try {
    const result = run(rule, { self: toCel(self), oldSelf: toCel(oldSelf ?? null) });
    return typeof result === "boolean" ? result : { error: `not a bool: ${String(result)}` };
  } catch (e) {
    return { error: String(e.message ?? e).split("\n")[0] };
  }
});
process.stdout.write(JSON.stringify(results));
