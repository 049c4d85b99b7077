#!/usr/bin/env python3
"""A Python example client of dllm-server: a streamed generation, and model
and server information. Uses Debian's python3-grpcio and the stubs that the
build generates from proto/dllm/v1/dllm.proto into build/client/python
(pass --stubs DIR, or set DLLM_PYTHON_STUBS, when they live elsewhere).

  /usr/bin/python3 client/python/dllm_client.py --target 127.0.0.1:50051 generate "Hello"
  /usr/bin/python3 client/python/dllm_client.py info

Failures print "error: CODE: message" and exit 1.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_STUBS = os.path.join(HERE, "..", "..", "build", "client", "python")


def load_stubs(stubs_dir):
    sys.path.insert(0, stubs_dir)
    try:
        from dllm.v1 import dllm_pb2, dllm_pb2_grpc  # noqa: E402 (generated)
    except ImportError as e:
        sys.exit(f"error: cannot import the generated stubs from {stubs_dir} ({e}); "
                 "build the dllm_python_stubs target first")
    return dllm_pb2, dllm_pb2_grpc


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--stubs", default=os.environ.get("DLLM_PYTHON_STUBS", DEFAULT_STUBS))
    parser.add_argument("--timeout", type=float, default=None, help="deadline in seconds")
    parser.add_argument("--json", action="store_true", help="one JSON object as output")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("prompt")
    gen.add_argument("--gen-length", type=int, default=0)
    gen.add_argument("--steps", type=int, default=0)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--chat", action="store_true")
    sub.add_parser("info")
    args = parser.parse_args()

    pb, pb_grpc = load_stubs(args.stubs)
    import grpc
    with grpc.insecure_channel(args.target) as channel:
        stub = pb_grpc.DiffusionLMStub(channel)
        try:
            (generate if args.command == "generate" else info)(stub, pb, args)
        except grpc.RpcError as e:
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
