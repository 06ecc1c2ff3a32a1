"""Read one ``--config`` file into a flat dict of settings, within bounds.

Kinds, tried in this order: JSON (DeepSpeed config, Hugging Face TrainingArguments, any JSON), TOML
(``.toml``: torchtitan), Megatron's arguments block (a log excerpt), command-line flags
(``--tensor-model-parallel-size 2 ...``), environment lines (``WORLD_SIZE=8``), YAML (W&B
``config.yaml``, Lightning ``hparams.yaml``, torchtitan/Hydra configs).

Bounds: a regular file of at most ``CONFIG_MAX_BYTES``; numbers of any length (a 5,000-digit integer is
inf, not a crash); nesting flattened to ``MAX_DEPTH`` levels; YAML composed first and refused when its
aliases refer to themselves or expand it past ``YAML_MAX_NODES`` values (an alias bomb), before any
value is built. Nothing here evaluates the file's content.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .series import normalise_key
from .source import CONFIG_MAX_BYTES, read_bounded

MAX_DEPTH = 32
YAML_MAX_NODES = 100_000  # real configs hold hundreds to a few thousand values
_FLAG_RE = re.compile(r"(?<![\w-])--([A-Za-z][\w-]{0,127})(?:[= ]{1,8}(?!--)(\S{1,4096}))?")
_ENV_RE = re.compile(r"^[ \t]{0,64}(?:export[ \t]{1,8})?([A-Z_][A-Z0-9_]{0,127})=(\S{0,4096})[ \t]*$")
_MEGATRON_ARGS_RE = re.compile(r"^[ \t]{0,64}\w{1,128} \.{2,} ", re.M)
_YAML_KEY_RE = re.compile(r"^\w[\w.-]{0,200}:\s", re.M)


def read_config(path: str) -> tuple[dict[str, Any], str]:
    """Read one config file into a flat dict of settings and say what it was."""
    raw = read_bounded(path, "config", CONFIG_MAX_BYTES)
    text = raw.decode("utf-8", "replace")
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{"):
        from .jsonlog import loads_lenient

        try:
            obj = loads_lenient(raw)
        except ValueError as exc:
            raise LogError(path, "is not valid JSON", str(exc)[:200], "fix the config file") from None
        if not isinstance(obj, dict):
            raise LogError(path, "is JSON but not an object of settings", type(obj).__name__, "fix the config file")
        kind = (
            "DeepSpeed config"
            if _is_deepspeed(obj)
            else ("Hugging Face TrainingArguments" if "per_device_train_batch_size" in obj else "JSON config")
        )
        return flatten(obj, kind), kind
    if path.endswith(".toml"):
        return flatten(_load_toml(path, text), "TOML config"), "TOML config"
    if "arguments" in text and _MEGATRON_ARGS_RE.search(text):
        from .megatron import ARG_RE, arg_value

        args = {m.group(1): arg_value(m.group(2)) for m in map(ARG_RE.match, text.splitlines()) if m}
        return {normalise_key(k): v for k, v in args.items()}, "Megatron arguments"
    flags = _FLAG_RE.findall(text)
    if len(flags) >= 2:
        out = {normalise_key(k): (scalar(v) if v else True) for k, v in flags}
        return out, "command-line arguments"
    env = [m for m in map(_ENV_RE.match, text.splitlines()) if m]
    if env:
        return {normalise_key(k): scalar(v) for k, v in (m.groups() for m in env)}, "environment"
    if path.endswith((".yaml", ".yml")) or _YAML_KEY_RE.search(text):
        obj = load_yaml(path, text)
        if isinstance(obj, dict):
            return flatten(obj, "YAML config"), "YAML config"
    raise LogError(
        path,
        "is not a config tracedoc knows",
        f"starts {excerpt(text)}",
        "pass Megatron arguments, a DeepSpeed or TrainingArguments JSON, a TOML or YAML config, or "
        "WORLD_SIZE=... lines",
    )


def _is_deepspeed(obj: dict) -> bool:
    return any(k in obj for k in ("train_micro_batch_size_per_gpu", "zero_optimization", "train_batch_size"))


def scalar(text: str) -> Any:
    """A flag or environment value: bool, int, float (inf past float's range) or the text."""
    t = text.strip().strip("'\"")
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if len(t) <= 4000:  # int() refuses longer digit strings
        try:
            return int(t)
        except ValueError:
            pass
    try:
        return float(t)
    except ValueError:
        return t


def _load_toml(path: str, text: str) -> dict:
    try:
        import tomli as tomllib
    except ImportError:  # pragma: no cover - tomli is a dependency
        import tomllib
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        raise LogError(path, "is not valid TOML", str(exc).split("\n")[0][:200], "fix the config file") from None


def load_yaml(path: str, text: str) -> Any:
    """YAML through PyYAML's safe loader, composed first: refused when an alias refers to the node that
    holds it, or when aliases expand the document past YAML_MAX_NODES values."""
    try:
        import yaml
    except ImportError:
        raise LogError(
            path, "is YAML, which needs PyYAML", None, "pip install pyyaml, or pass the config as JSON or TOML"
        ) from None
    depth = _bracket_depth(text)
    if depth > MAX_DEPTH * 8:
        raise LogError(path, f"is YAML nested {depth} levels deep", None, "pass the config as JSON or TOML")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(path, node, yaml)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise LogError(path, "is not valid YAML", str(exc).split("\n")[0][:200], "fix the config file") from None
    except RecursionError:
        raise LogError(path, "is YAML nested too deeply to read", None, "pass the config as JSON or TOML") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise LogError(path, "holds a YAML value tracedoc cannot read", str(exc)[:200], "fix the config file") from None
    finally:
        loader.dispose()


def _bracket_depth(text: str) -> int:
    """The deepest nesting of flow brackets ([ { ... } ]) in the text, counted in one vectorised pass
    (quotes are not parsed: a bracket inside a string counts too, which only errs on the safe side)."""
    import numpy as np

    raw = np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8)
    step = (raw == ord("[")).astype(np.int32) + (raw == ord("{")) - (raw == ord("]")) - (raw == ord("}"))
    return int(np.cumsum(step).max()) if step.size else 0


def _check_expansion(path: str, root, yaml) -> None:
    """The number of values the document has once every alias is expanded, counted on the node graph
    without expanding it (each node once): past YAML_MAX_NODES, or a node inside itself, is refused."""
    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = _children(node, yaml)
        if done:
            open_nodes.discard(key)
            total = 1 + sum(size[id(k)] for k in kids)
            if total > YAML_MAX_NODES:
                raise LogError(
                    path,
                    f"is YAML whose aliases expand it to more than {YAML_MAX_NODES:,} values (an alias bomb?)",
                    None,
                    "pass the config without aliases, as JSON or TOML",
                )
            size[key] = total
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise LogError(
                path,
                "is YAML with an alias inside the node it refers to (a self-referencing anchor)",
                f"line {node.start_mark.line + 1}",
                "pass the config without that alias",
            )
        open_nodes.add(key)
        stack.append((node, True))
        for kid in kids:
            if id(kid) in open_nodes:
                raise LogError(
                    path,
                    "is YAML with an alias inside the node it refers to (a self-referencing anchor)",
                    f"line {kid.start_mark.line + 1}",
                    "pass the config without that alias",
                )
            if id(kid) not in size:
                stack.append((kid, False))


def _children(node, yaml) -> list:
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def flatten(obj: dict, kind: str) -> dict[str, Any]:
    """Nested settings as one flat dict: each value under its joined path (``zero_optimization_stage``) and,
    unless taken, its own key; W&B's ``{key: {value: ...}}`` unwrapped; at most MAX_DEPTH levels."""
    out: dict[str, Any] = {}
    stack: list[tuple[Any, str, int]] = [(iter(obj.items()), "", 0)]  # depth first, in file order
    while stack:
        items, prefix, depth = stack[-1]
        for k, v in items:
            key = normalise_key(f"{prefix}_{k}" if prefix else str(k))
            if isinstance(v, dict) and set(v) == {"value"}:  # W&B config.yaml: {key: {value: ...}}
                v = v["value"]
            if isinstance(v, dict):
                if depth + 1 < MAX_DEPTH:
                    stack.append((iter(v.items()), key, depth + 1))
                    break
            else:
                out[key] = v
                out.setdefault(normalise_key(str(k)), v)
        else:
            stack.pop()
    if kind == "DeepSpeed config":
        if "train_batch_size" in out:
            out["global_batch_size"] = out["train_batch_size"]  # DeepSpeed's train_batch_size is global
        for prec in ("fp16", "bf16"):
            if out.get(f"{prec}_enabled") is not None:
                out[prec] = out[f"{prec}_enabled"] in (True, "true", "auto")
        if out.get("fp16_loss_scale") is not None:
            out["loss_scale"] = out["fp16_loss_scale"] or None  # 0 = dynamic
    for key in ("mixed_precision", "mixed_precision_param", "training_mixed_precision_param", "precision"):
        v = str(out.get(key, ""))[:100].lower()
        if "bf16" in v or "bfloat16" in v:
            out.setdefault("bf16", True)
        elif "fp16" in v or "float16" in v or v == "16" or v == "16-mixed":
            out.setdefault("fp16", True)
    return out
