#!/usr/bin/env python3
"""Renders conversations through a chat template with Python's jinja2, the way
Hugging Face transformers' apply_chat_template does (a sandboxed environment
with trim_blocks and lstrip_blocks, a tojson filter that keeps non-ASCII, and
raise_exception), with add_generation_prompt true. The reference for
tests/engine/tokenizer/chat_template_jinja_test.cc.

stdin: {"template": PATH, "bos_token": S, "eos_token": S, "conversations": [[{role, content}]]}
stdout: a JSON array of the rendered strings, one per conversation.
"""
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    request = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(request["template"], encoding="utf-8") as f:
        template = env.from_string(f.read())
    out = [template.render(messages=conversation, bos_token=request["bos_token"],
                           eos_token=request["eos_token"], add_generation_prompt=True)
           for conversation in request["conversations"]]
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
