"""The share a probe measures against, from wherever it is written: a number given on the
command line, the share file that `gpu-admission probe --render-only` writes, or the webhook's
shares record on the pod itself, as a downward-API volume of its annotations shows it.

The record is read here by its published format (webhook/engine/share_record.py), not through
the engine's reader: this package imports nothing outside the standard library, and
tests/unit/test_probe_share.py holds the two readers to the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The webhook's annotations (webhook/policy/defaults.py: SHARES_ANNOTATION, POLICY_ANNOTATION).
SHARES_ANNOTATION = "gpu-admission.example.com/shares"
POLICY_ANNOTATION = "gpu-admission.example.com/policy"
MIB_PER_UNIT = {"MiB": 1, "GiB": 1024}
# The keys of a share file besides shareMiB and env, each a string where present.
DESCRIPTIONS = ("policy", "backend", "model", "fraction", "memory", "asked", "container")


class ShareError(ValueError):
    """A share that cannot be read: the message says which file and what is wrong."""


@dataclass(frozen=True)
class Share:
    """`mib`: the share's memory; `env`: the variables a pod with it is given, which the probe
    gives each framework; `about`: what the share is (policy, backend, model, the amount asked),
    as far as its source says; `source`: where it was read."""

    mib: int
    env: Mapping[str, str] = field(default_factory=dict)
    about: Mapping[str, str] = field(default_factory=dict)
    source: str = "--share-mib"

    def describe(self) -> str:
        details = ", ".join(f"{key} {value}" for key, value in self.about.items())
        return f"{self.mib} MiB" + (f" ({details})" if details else "") + f", from {self.source}"

    def summary(self) -> dict[str, Any]:
        return {"shareMiB": self.mib, **self.about, "source": self.source}


def share_file_text(share: Share) -> str:
    """The share file for `share`: {"shareMiB": N, "env": {...}, "policy": ..., ...}."""
    body: dict[str, Any] = {"shareMiB": share.mib, "env": dict(share.env), **share.about}
    return json.dumps(body, indent=2) + "\n"


def read_share_file(path: Path) -> Share:
    data = _json_object(_read(path), path)
    mib = data.get("shareMiB")
    if isinstance(mib, bool) or not isinstance(mib, int) or mib <= 0:
        raise ShareError(f"{path}: shareMiB must be a whole number of MiB above 0, not {mib!r}")
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in env.items()
    ):
        raise ShareError(f"{path}: env must map variable names to strings")
    about = {key: data[key] for key in DESCRIPTIONS if isinstance(data.get(key), str)}
    return Share(mib, env, about, str(path))


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=VALUE lines, as `docker run --env-file` reads them: blank lines and lines that start
    with # are skipped, and the value is taken as written (no quotes removed)."""
    env: dict[str, str] = {}
    for number, line in enumerate(_read(path).splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, equals, value = line.lstrip().partition("=")
        if not equals or not name.strip() or any(c.isspace() for c in name.strip()):
            raise ShareError(f"{path}:{number}: not NAME=VALUE: {text}")
        env[name.strip()] = value
    return env


def read_annotations_share(path: Path, *, container: str | None = None, unit: str = "MiB") -> Share:
    """The share of `container` (or of the pod's only container with one) in the webhook's
    shares record, in the annotations file of a downward-API volume. Its env is already the
    container's own, so the share carries none. `unit` is the policy's, for records that give
    the share in it alone (`vram`, without `mib`)."""
    annotations = parse_downward_api(_read(path), path)
    text = annotations.get(SHARES_ANNOTATION)
    if text is None:
        raise ShareError(
            f"{path}: no {SHARES_ANNOTATION} annotation: the webhook gave this pod no share "
            "(is its namespace governed by a sharing policy, and did it ask for a fraction?)"
        )
    try:
        record = json.loads(text)
        containers = record["containers"]
        if not isinstance(containers, dict):
            raise TypeError("containers is not an object")
    except (ValueError, TypeError, KeyError) as error:
        why = f"{path}: the {SHARES_ANNOTATION} annotation does not parse: {error}"
        raise ShareError(why) from None
    name = _container(containers, container, path)
    entry = containers[name]
    mib = _record_mib(entry, unit, path, name)
    about = {"container": name}
    policy = annotations.get(POLICY_ANNOTATION)
    if policy:
        about["policy"] = policy
    if isinstance(record.get("model"), str):
        about["model"] = record["model"]
    if isinstance(entry.get("asked"), str):
        about["asked"] = entry["asked"]
    return Share(mib, {}, about, str(path))


def parse_downward_api(text: str, where: Path | str = "annotations") -> dict[str, str]:
    """The map in a downward-API file: one `key="value"` line per entry, the value quoted as
    Go's %q quotes it (the kubelet writes it with fmt.Sprintf("%s=%q")). ShareError names the
    line that does not read so."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, equals, quoted = line.partition("=")
        if not equals or not key:
            raise ShareError(f'{where}:{number}: not key="value"')
        try:
            found[key] = unquote_go(quoted)
        except ValueError as error:
            raise ShareError(f"{where}:{number}: {key}: {error}") from None
    return found


_SIMPLE_ESCAPES = {
    "a": 0x07,
    "b": 0x08,
    "f": 0x0C,
    "n": 0x0A,
    "r": 0x0D,
    "t": 0x09,
    "v": 0x0B,
    "\\": 0x5C,
    '"': 0x22,
    "'": 0x27,
}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def unquote_go(quoted: str) -> str:
    """The string a Go double-quoted literal stands for (strconv.Unquote): escapes of bytes
    (\\x, octal) are put together as UTF-8, those of characters (\\u, \\U) as characters."""
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise ValueError("the value is not a double-quoted string")
    body = quoted[1:-1]
    out = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char == '"':
            raise ValueError(f"an unescaped quote at {index + 1}")
        if char != "\\":
            out += char.encode()
            index += 1
            continue
        if index + 1 >= len(body):
            raise ValueError("the value ends in a backslash")
        kind = body[index + 1]
        if kind in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[kind])
            index += 2
        elif kind in _HEX_DIGITS:
            digits = body[index + 2 : index + 2 + _HEX_DIGITS[kind]]
            value = _number(digits, 16, _HEX_DIGITS[kind], f"\\{kind}")
            if kind == "x":
                out.append(value)
            else:
                out += chr(value).encode("utf-8", "surrogatepass")
            index += 2 + _HEX_DIGITS[kind]
        elif kind in "01234567":
            value = _number(body[index + 1 : index + 4], 8, 3, "an octal escape")
            if value > 0xFF:
                raise ValueError(f"an octal escape above 255 at {index + 1}")
            out.append(value)
            index += 4
        else:
            raise ValueError(f"an unknown escape \\{kind} at {index + 1}")
    return out.decode("utf-8", "replace")


def _number(digits: str, base: int, length: int, what: str) -> int:
    if len(digits) != length:
        raise ValueError(f"{what} needs {length} digits")
    try:
        return int(digits, base)
    except ValueError:
        raise ValueError(f"{what} with digits {digits!r}") from None


def _container(containers: Mapping[str, Any], wanted: str | None, path: Path) -> str:
    names = sorted(containers)
    if wanted is not None:
        if wanted not in containers:
            listed = ", ".join(names) or "none"
            raise ShareError(f"{path}: the record has no share for container {wanted!r} ({listed})")
        return wanted
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise ShareError(
            f"{path}: the record holds a share for {len(names)} containers ({listed}): "
            "name one with --container"
        )
    return names[0]


def _record_mib(entry: Any, unit: str, path: Path, name: str) -> int:
    """The share's MiB: the record's `mib` where it has one, else its `vram` in `unit`."""
    if not isinstance(entry, dict):
        raise ShareError(f"{path}: the share of container {name!r} is not an object")
    mib, vram = entry.get("mib"), entry.get("vram")
    found = _whole(mib) or _whole(vram) * MIB_PER_UNIT[unit]
    if found:
        return found
    raise ShareError(
        f"{path}: the share of container {name!r} gives no MiB (mib {mib!r}, vram {vram!r})"
    )


def _whole(value: Any) -> int:
    """The number in a string of ASCII digits; 0 for anything else."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return 0


def _json_object(text: str, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ShareError(f"{path}: not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ShareError(f"{path}: must hold a JSON object")
    return data


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise ShareError(f"{path}: cannot be read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ShareError(f"{path}: is not UTF-8 text") from None
