#!/usr/bin/env python3
"""A Python example client of dllm-server: a streamed generation, and model
and server information. Uses Debian's python3-grpcio and the stubs that the
build generates from proto/dllm/v1/dllm.proto into build/client/python
(pass --stubs DIR, or set DLLM_PYTHON_STUBS, when they live elsewhere).

  /usr/bin/python3 client/python/dllm_client.py generate --target 127.0.0.1:50051 "Hello"
  /usr/bin/python3 client/python/dllm_client.py info --json

The flag convention of all three clients (C++, Python, Node): flags may come
before or after the command, as `--name value` or `--name=value`; `--` ends
the flags. Usage errors print "dllm_client.py: what is wrong" and the usage,
and exit 2; failures print "error: CODE: message" and exit 1.
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_STUBS = os.path.join(HERE, "..", "..", "build", "client", "python")
PROG = "dllm_client.py"
USAGE = (f"usage: {PROG} COMMAND [flags] [PROMPT]\n"
         "commands: generate PROMPT | info\n"
         "flags: --target HOST:PORT (default 127.0.0.1:50051) --timeout-seconds S --json\n"
         "       --stubs DIR (generated stubs; default build/client/python)\n"
         "generate: --gen-length N --steps N --temperature T --seed S --chat\n")


class UsageError(Exception):
    pass


def whole_number(name, text, limit=2**32 - 1):
    if not (text.isascii() and text.isdigit()) or int(text) > limit:
        raise UsageError(f"--{name}: {text!r} is not a whole number in [0, {limit}]")
    return int(text)


def seed_number(name, text):
    return whole_number(name, text, limit=2**64 - 1)


def positive_seconds(name, text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--{name}: {text!r} is not a number of seconds > 0")
    return value


def non_negative(name, text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"--{name}: {text!r} is not a finite number >= 0")
    return value


def text_value(name, text):
    return text


# name -> (attribute, parser(name, text) or None for a boolean flag, default)
FLAGS = {
    "target": ("target", text_value, "127.0.0.1:50051"),
    "timeout-seconds": ("timeout", positive_seconds, None),
    "json": ("json", None, False),
    "stubs": ("stubs", text_value, os.environ.get("DLLM_PYTHON_STUBS", DEFAULT_STUBS)),
    "gen-length": ("gen_length", whole_number, 0),
    "steps": ("steps", whole_number, 0),
    "temperature": ("temperature", non_negative, 0.0),
    "seed": ("seed", seed_number, None),
    "chat": ("chat", None, False),
    "help": ("help", None, False),
}
GENERATE_ONLY = {"gen-length", "steps", "temperature", "seed", "chat"}


class Args:
    pass


def parse_args(argv):
    args = Args()
    for attr, _, default in FLAGS.values():
        setattr(args, attr, default)
    given, positional = set(), []
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "--":
            positional.extend(argv[i:])
            break
        if a in ("-h", "--help"):
            args.help = True
            continue
        if not a.startswith("--") or len(a) < 3:
            positional.append(a)
            continue
        name, eq, value = a[2:].partition("=")
        if name not in FLAGS:
            raise UsageError(f"unknown flag --{name}")
        attr, parse, _ = FLAGS[name]
        if parse is None:
            if eq:
                raise UsageError(f"--{name} takes no value")
            setattr(args, attr, True)
        else:
            if not eq:
                if i >= len(argv):
                    raise UsageError(f"--{name} needs a value")
                value = argv[i]
                i += 1
            setattr(args, attr, parse(name, value))
        given.add(name)
    if args.help:
        return args
    if not positional:
        raise UsageError("no command given")
    args.command, rest = positional[0], positional[1:]
    if args.command == "generate":
        if len(rest) != 1:
            raise UsageError("generate: expected one PROMPT argument (quote it)")
        args.prompt = rest[0]
    elif args.command == "info":
        if rest:
            raise UsageError(f"info: unexpected argument {rest[0]!r}")
        misplaced = sorted(given & GENERATE_ONLY)
        if misplaced:
            raise UsageError(f"info: --{misplaced[0]} is a generate flag")
    else:
        raise UsageError(f"unknown command {args.command!r}")
    return args


def load_modules(stubs_dir):
    """grpc and the generated stubs, or a message saying which is missing."""
    try:
        import grpc
    except ImportError:
        sys.exit("error: the Python gRPC package is not installed "
                 "(Debian: apt install python3-grpcio python3-protobuf)")
    sys.path.insert(0, stubs_dir)
    try:
        from dllm.v1 import dllm_pb2, dllm_pb2_grpc  # noqa: E402 (generated)
    except ImportError as e:
        sys.exit(f"error: cannot import the generated stubs from {stubs_dir} ({e}); "
                 "build the dllm_python_stubs target, or pass --stubs DIR")
    return grpc, dllm_pb2, dllm_pb2_grpc


def generate(stub, pb, args):
    request = pb.GenerateRequest(
        prompt=pb.Prompt(text=args.prompt, apply_chat_template=args.chat),
        diffusion=pb.DiffusionParams(gen_length=args.gen_length, steps=args.steps),
        sampling=pb.SamplingParams(temperature=args.temperature),
        stream=pb.StreamOptions(detail=pb.DETAIL_TEXT),
    )
    if args.seed is not None:
        request.sampling.seed = args.seed
    streamed, final, request_id = [], None, None
    for event in stub.Generate(request, timeout=args.timeout):
        request_id = event.request_id
        kind = event.WhichOneof("event")
        if kind == "step":
            streamed.append(event.step.text_delta)
            if not args.json:
                print(event.step.text_delta, end="", flush=True)
        elif kind == "final":
            final = event.final
    if final is None:
        sys.exit("error: INTERNAL: the stream ended without a Final event")
    reason = pb.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_")
    if args.json:
        print(json.dumps({"request_id": request_id, "streamed_text": "".join(streamed),
                          "text": final.text, "finish_reason": reason,
                          "generated_tokens": final.usage.generated_tokens,
                          "steps": final.usage.steps, "seed": final.seed}))
    else:
        print()
        print(f"finish: {reason}, {final.usage.generated_tokens} tokens, "
              f"{final.usage.steps} steps, seed {final.seed}", file=sys.stderr)


def info(stub, pb, args):
    model = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=args.timeout)
    server = stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=args.timeout)
    if args.json:
        print(json.dumps({"model": {"name": model.name, "architecture": model.architecture,
                                    "vocab_size": model.vocab_size,
                                    "mask_token_id": model.mask_token_id},
                          "server": {"version": server.version, "isa": server.isa,
                                     "max_running": server.max_running}}))
        return
    print(f"model: {model.name} ({model.architecture}, {model.n_layer} layers, "
          f"vocab {model.vocab_size}, {model.weight_format})")
    print(f"server: dllm {server.version}, isa {server.isa}, "
          f"{server.requests_running}/{server.max_running} running")


def main(argv):
    try:
        args = parse_args(argv)
    except UsageError as e:
        sys.stderr.write(f"{PROG}: {e}\n{USAGE}")
        return 2
    if args.help:
        sys.stdout.write(USAGE)
        return 0
    grpc, pb, pb_grpc = load_modules(args.stubs)
    with grpc.insecure_channel(args.target) as channel:
        stub = pb_grpc.DiffusionLMStub(channel)
        try:
            (generate if args.command == "generate" else info)(stub, pb, args)
        except grpc.RpcError as e:
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
