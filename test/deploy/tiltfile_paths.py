# Parses the Tiltfile (Starlark is Python syntax) and prints, one per line, every local path
# it names that does not exist: string constants that look like repository paths, with
# '%s' filled in from its SERVICES and LIBS. Prints nothing when all exist.
import ast, os, sys

root = sys.argv[1]
tree = ast.parse(open(os.path.join(root, "Tiltfile")).read(), "Tiltfile")
names = {}
for node in tree.body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        try:
            names[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            pass
fills = list(names.get("SERVICES", {})) + list(names.get("LIBS", []))
# Strings that are not host paths: what runs in a container, commands, the sync targets.
skip = set()
for call in ast.walk(tree):
    if isinstance(call, ast.Call):
        for kw in call.keywords:
            if kw.arg in ("entrypoint", "cmd", "serve_cmd", "env"):
                skip.update(id(n) for n in ast.walk(kw.value))
        if isinstance(call.func, ast.Name) and call.func.id == "sync" and len(call.args) == 2:
            skip.update(id(n) for n in ast.walk(call.args[1]))
missing = []
for node in ast.walk(tree):
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
        continue
    s = node.value
    if "/" not in s or " " in s or s.startswith(("/", "http", "ext://", "ephemera/", "%d")) or "://" in s:
        continue
    for path in ([s % ((f,) * s.count("%s")) for f in fills] if "%s" in s else [s]):
        if "@" in path:
            continue
        if not os.path.exists(os.path.join(root, path)):
            missing.append(path)
for name in ("Dockerfile",):
    if not os.path.exists(os.path.join(root, name)):
        missing.append(name)
print("\n".join(sorted(set(missing))))
