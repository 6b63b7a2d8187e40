"""The python tests' report: one line per check, the failed ones remembered in `failures`."""
failures = []


def check(what, ok, detail=""):
    print(f"{'ok' if ok else 'FAILED'}: {what}" + (f"\n    {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)


def close(a, b, rel):
    """a within rel of b (absolutely where |b| < 1); None on either side is never close."""
    return a is not None and b is not None and abs(a - b) <= rel * max(1.0, abs(b))


def finish(name):
    """The test's exit status, after its last line: 1 when a check failed."""
    print(f"{name}: {len(failures)} FAILED" if failures else f"{name}: all passed")
    return 1 if failures else 0
