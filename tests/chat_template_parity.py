"""chat_template_parity (run by tests/test_chat_template.sh): sft_jsonl `messages` and `vktrain generate --chat`
against `transformers`' apply_chat_template as the oracle, with the chat
templates of the published models as their tokenizer_config.json files hold
them (written out below; nothing can be downloaded):

  llama3.2  Llama-3.2-1B-Instruct (Llama 3.1's form: a system turn with
            "Cutting Knowledge Date" and "Today Date" always comes first)
  llama3    Meta-Llama-3-8B-Instruct
  qwen2.5   Qwen2.5-0.5B-Instruct (ChatML, default system message)
  smollm2   SmolLM2-135M-Instruct (ChatML, another default system message)
  llama2    Llama-2-7b-chat-hf ([INST], <<SYS>>, SentencePiece tokenizer)
  gemma2    gemma-2-2b-it (<start_of_turn>, 'model', no system role;
            Gemma's SentencePiece-style tokenizer)
  gemma3    gemma-3-1b-it (the system message opens the first user turn)
  qwen3     Qwen3-0.6B (ChatML with the thinking block: '<think>' content
            cut out of earlier turns, an empty block written before the
            last answer)
  phi3      Phi-3-mini-4k-instruct (<|user|>\n ... <|end|>\n, EOS at the
            end; role tokens that swallow the white space after them)
  phi3.5    Phi-3.5-mini-instruct (an empty system message left out)
  phi4-mini Phi-4-mini-instruct (no newline after the role tags; the o200k
            byte-level tokenizer)

each over a small tokenizer of its family built with `tokenizers` (the
builders of test_tokenizer_hf.py) that carries the family's special tokens.

Checks:
 1. the text vktrain writes for each conversation (system messages,
    several turns, white space that the templates trim or keep, Unicode,
    a final user turn) equals apply_chat_template's, with and without the
    generation prompt, and the family is recognized from the template;
 2. the sft_jsonl data pipeline stores exactly the ids the tokenizer gives
    for that text, and trains exactly the tokens that hold the assistant's
    content and the end-of-turn after it: the tokens from the one holding
    its first byte to the one holding its last, as transformers' assistant
    mask counts them (each token's bytes read back from the tokenizer);
    where those bytes lie is found from apply_chat_template's own
    renderings of the conversation's beginnings; train_on_input trains
    every token;
 3. errors: a template vktrain does not know (suggests
    tokenizer.chat_template), a template whose special strings are not
    tokens, Llama 2's and Gemma's role order (file:line), Gemma 2's missing
    system role, variants of the known templates that vktrain does not
    write exactly (refused, not guessed), the byte tokenizer with a
    template;
 4. end to end: a tiny Llama trained on two conversations written with the
    Llama 3.2 template answers `vktrain generate --chat` with the
    memorized reply and stops at <|eot_id|>;
 5. stop tokens: a model built to always draw one token stops --chat at
    the end-of-turn token, at the tokenizer's eos and at
    generation_config.json's eos_token_id ids, and an ordinary token does
    not stop it.

The oracle is transformers==4.44.2 (PyPI; it works with Debian's torch) in
the virtual environment over Debian's Python that scripts/deps.sh test
makes (test_chat_template.sh runs this file with its Python), with
Debian's jinja2. 4.44.2 has no strftime_now, so Llama 3.2's template writes
its fixed date, as vktrain does.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WANT_TRANSFORMERS = "4.44.2"

# Only transformers' tokenizer side is the oracle here: leave torch unloaded.
os.environ.update(USE_TORCH="0", USE_TF="0", USE_FLAX="0")
import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode  # noqa: E402

sys.path.insert(0, HERE)
import test_tokenizer_hf as tt  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers  # noqa: E402

TOOLS = os.environ.get("TOOLS", os.path.join(os.getcwd(), "tools"))
VKTRAIN = os.environ.get("VKTRAIN")
DRIVER = os.path.join(TOOLS, "chat_driver")

failures = 0


def check(name, ok, detail=""):
    global failures
    if ok:
        print("ok:", name)
    else:
        failures += 1
        print("FAIL:", name, detail)


# ---- the templates, as the published tokenizer_config.json files hold them ----

LLAMA32 = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

LLAMA3 = (r"{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          r"'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          r"'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          r"{{ content }}{% endfor %}{% if add_generation_prompt %}"
          r"{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

QWEN25 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

SMOLLM2 = (r"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           r"{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
           r"<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
           r"'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
           r"{% endif %}")

LLAMA2 = (r"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
          r"messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
          r"{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0)"
          r" %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
          r"{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + "
          r"system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = "
          r"message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
          r"content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + "
          r"' ' + eos_token }}{% endif %}{% endfor %}")

# Gemma 2 (gemma-2-2b-it; Gemma 1's is the same): no system role
GEMMA2 = (r"{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
          r"{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          r"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          r"{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
          r"{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
          r"{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")

# Gemma 3 (gemma-3-270m-it, gemma-3-1b-it): the system message opens the first user turn
GEMMA3 = r"""{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

# Qwen3 (Qwen3-0.6B): ChatML with the thinking block
QWEN3 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

# Phi-3-mini-4k-instruct; Phi-3.5-mini-instruct leaves out an empty system message
PHI3 = (r"{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
        r"'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
        r"{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
        r"{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"
        r"{% endif %}")
PHI35 = PHI3.replace("message['role'] == 'system' %}", "message['role'] == 'system' and message['content'] %}")

# Phi-4-mini-instruct: no newline after the role tags
PHI4MINI = (r"{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
            r"message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + "
            r"message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + "
            r"message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
            r"{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}")

# Zephyr's (TinyLlama-Chat): a family vktrain does not write
ZEPHYR = (r"{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
          r"message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + "
          r"message['content'] + eos_token }}\n{% endif %}\n{% endfor %}")


def conversations():
    u, a, s = "user", "assistant", "system"

    def m(role, content):
        return {"role": role, "content": content}
    return [
        [m(u, "Hello!"), m(a, "Hi there. How can I help?")],
        [m(s, "You are terse."), m(u, "What is 2+2?"), m(a, "4"), m(u, "And 3+3?"), m(a, "6, of course.")],
        [m(s, "  padded system \n"), m(u, " lead and trail  \n"), m(a, "\n\nanswer after newlines\n line 2 \u3000")],
        [m(u, "café 中文 😀 naïve"), m(a, "Ünïcödé ✓ 123 4567")],
        [m(u, "q1"), m(a, "a1"), m(u, "q2 with no answer")],
        [m(u, "just a question")],
        [m(u, "x"), m(a, " leading space and trailing  ")],
        [m(u, "tabs\tand\nnewlines\n\n"), m(a, "code:\n    def f():\n        return 1\n")],
        [m(u, "empty answer"), m(a, "")],
        [m(s, "sys"), m(u, "q"), m(a, "a\u00a0"), m(u, "q2"), m(a, "\u2003a2")],
        [m(u, "Think first."), m(a, "<think>\nStep one.\n\n</think>\n\nThe answer."), m(u, "Again?"),
         m(a, "<think>Two</think>Done.")],
        [m(u, "q"), m(a, "\n<think>\n\n</think>\n\nno reasoning"), m(u, "tool?"), m(a, "a </think> b </think>\n c")],
        [m(s, ""), m(u, "empty system"), m(a, "ok")],
    ]


# ---- the tokenizers ----

def llama3_tokenizer(rng):
    """A small tokenizer.json of the Llama 3 family with its special tokens."""
    l3_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    l3 = tt.train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(tt.LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), l3_specials)
    l3["model"]["ignore_merges"] = True
    return l3


def build_families(rng, work):
    l3 = llama3_tokenizer(rng)
    qw_specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    qw = tt.train_byte_level(rng, normalizers.NFC(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(tt.QWEN2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), qw_specials)
    sm = tt.train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]), qw_specials)
    sp_decoder = tt.state(decoders.Sequence([decoders.Replace(tt.META, " "), decoders.ByteFallback(),
                                             decoders.Fuse(), decoders.Strip(" ", 1, 0)]))
    legacy = tt.state(normalizers.Sequence([normalizers.Prepend(tt.META), normalizers.Replace(" ", tt.META)]))
    sp = tt.sentencepiece_json(rng, legacy, None, sp_decoder)
    gm = tt.gemma_json(rng)
    q3 = Tokenizer.from_str(json.dumps(qw))
    q3.add_tokens([AddedToken("<think>", normalized=False), AddedToken("</think>", normalized=False)])
    q3 = json.loads(q3.to_str())
    # Phi-3's role tokens swallow the white space after them (rstrip)
    p3 = Tokenizer.from_str(json.dumps(sp))
    p3.add_special_tokens([AddedToken("<|endoftext|>", special=True)] + [
        AddedToken(t, rstrip=True, special=True) for t in ("<|assistant|>", "<|system|>", "<|end|>", "<|user|>")])
    p3 = json.loads(p3.to_str())
    p4 = tt.train_byte_level(rng, None, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(tt.O200K_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"])
    gemma_specials = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}
    phi3_specials = {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"}
    # name -> (tokenizer.json, template, tokenizer_config.json's special tokens, family, end of turn)
    fams = {
        "llama3.2": (l3, LLAMA32, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "llama3",
                     "<|eot_id|>"),
        "llama3": (l3, LLAMA3, {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, "llama3",
                   "<|eot_id|>"),
        "qwen2.5": (qw, QWEN25, {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                    "chatml", "<|im_end|>"),
        "smollm2": (sm, SMOLLM2, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                                  "pad_token": "<|im_end|>"}, "chatml", "<|im_end|>"),
        "llama2": (sp, LLAMA2, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, "llama2", "</s>"),
        "gemma2": (gm, GEMMA2, gemma_specials, "gemma", "<end_of_turn>"),
        "gemma3": (gm, GEMMA3, gemma_specials, "gemma", "<end_of_turn>"),
        "qwen3": (q3, QWEN3, {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "qwen3",
                  "<|im_end|>"),
        "phi3": (p3, PHI3, phi3_specials, "phi3", "<|end|>"),
        "phi3.5": (p3, PHI35, phi3_specials, "phi3", "<|end|>"),
        "phi4-mini": (p4, PHI4MINI, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, "phi3", "<|end|>"),
    }
    dirs = {}
    for name, (tok, tmpl, specials, _, _) in fams.items():
        dirs[name] = write_folder(os.path.join(work, name), tok, tmpl, specials)
    return fams, dirs


def write_folder(d, tok, tmpl, specials):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    cfg = dict(specials, tokenizer_class="PreTrainedTokenizerFast", model_max_length=4096, chat_template=tmpl)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
    return d


# ---- vktrain ----

def driver(*args):
    return subprocess.run([DRIVER] + [str(a) for a in args], capture_output=True, text=True)


def vk_render(tok_dir, template, gen, convs, work):
    path = os.path.join(work, "convs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    r = driver("render", tok_dir, template, int(gen), path)
    if r.returncode:
        raise RuntimeError(f"chat_driver render {tok_dir} {template}: {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def vk_data(tok_dir, convs, work, *overrides, lines=None):
    data = os.path.join(work, "chat.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    recipe = os.path.join(work, "chat.yaml")
    with open(recipe, "w") as f:
        f.write(f"output_dir: {work}/out\n"
                f"model: {{dim: 16, n_layers: 1, n_heads: 2, max_seq_len: 1024}}\n"
                f"tokenizer: {{type: hf, path: {tok_dir}}}\n"
                f"dataset: {{type: sft_jsonl, path: {data}}}\n")
    r = driver("data", recipe, *overrides)
    if r.returncode:
        return None, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    return ([int(x) for x in out["ids"].split()], [int(x) for x in out["trainable"].split()],
            out["template"]), ""


# ---- the oracle ----

def token_bytes(hf, tok, text, enc):
    """The byte range of the text each token holds. Byte-level tokens are
    read back to their bytes (tokenizers' own offsets are wrong where
    ignore_merges finds a whole piece in the vocab, as in Llama 3); the
    SentencePiece kinds' (Llama 2, Gemma, Phi-3) come from tokenizers'
    offsets."""
    if tok["model"].get("byte_fallback"):
        return [(len(text[:a].encode()), len(text[:b].encode())) for a, b in enc.offsets]
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    added = {str(a) for a in hf.added_tokens_decoder.values()}
    spans, at = [], 0
    for t in enc.tokens:
        n = len(t.encode()) if t in added else len(bytes(byte_of[c] for c in t))
        spans.append((at, at + n))
        at += n
    assert at == len(text.encode()), (family, text)
    return spans


def assistant_mask(hf, tok, family, eot, conv, text, enc):
    """1 for the tokens from the one holding the first byte of an assistant
    turn's output (what the template writes for it, then the end of turn)
    to the one holding its last, as transformers'
    return_assistant_tokens_mask counts them. Where an output starts is the
    length of apply_chat_template's rendering of the conversation before
    it, with the generation prompt (Llama 2 has none: it writes ' '); it
    ends at the first end of turn after that, and must end with the
    message's content as the family writes it (trimmed by Llama 3 and
    Gemma; Qwen3 keeps what follows the last </think>, after its thinking
    block in the turns that have one)."""
    mask = [0] * len(enc.ids)
    spans = token_bytes(hf, tok, text, enc)
    for i, m in enumerate(conv):
        if m["role"] != "assistant":
            continue
        if family == "llama2":
            before = hf.apply_chat_template(conv[:i], tokenize=False) + " "
            out = m["content"].strip() + " " + eot
        else:
            before = hf.apply_chat_template(conv[:i], tokenize=False, add_generation_prompt=True)
            written = m["content"].strip() if family in ("llama3", "gemma") else m["content"]
            if family == "qwen3" and "</think>" in written:
                written = written.split("</think>")[-1].lstrip("\n")
            out = text[len(before):text.index(eot, len(before)) + len(eot)]
            assert out.endswith(written + eot), (family, conv, out)
        assert text.startswith(before) and text[len(before):len(before) + len(out)] == out, (family, conv, text)
        start = len(before.encode())
        end = start + len(out.encode())
        for t, (a, b) in enumerate(spans):
            if a < end and b > start:
                mask[t] = 1
    return mask


def check_family(name, fam, tok_dir, convs, work):
    tok, _, _, family, eot = fam
    if name == "gemma2":  # it has no system role (check_errors)
        convs = [c for c in convs if c[0]["role"] != "system"]
    hf = AutoTokenizer.from_pretrained(tok_dir)
    for gen in (False, True):
        want = [hf.apply_chat_template(c, tokenize=False, add_generation_prompt=gen) for c in convs]
        got = vk_render(tok_dir, "auto", gen, convs, work)
        bad = [(c, w, g) for c, w, g in zip(convs, want, got) if g.get("text") != w]
        check(f"{name}: the text{' with the generation prompt' if gen else ''} equals apply_chat_template's "
              f"({len(convs)} conversations)", not bad,
              bad and f"\n  messages {bad[0][0]}\n  transformers {bad[0][1]!r}\n  vktrain      {bad[0][2]!r}")
    res, err = vk_data(tok_dir, convs, work)
    if res is None:
        check(f"{name}: the data pipeline opens the conversations", False, err)
        return
    ids, trainable, template = res
    check(f"{name}: the template is recognized as {family}", template == family, template)
    want_ids, want_mask, where = [], [], []
    for c in convs:
        text = hf.apply_chat_template(c, tokenize=False)
        enc = hf._tokenizer.encode(text, add_special_tokens=False)
        want_ids += enc.ids
        want_mask += assistant_mask(hf, tok, family, eot, c, text, enc)
        where += [(c, hf.convert_ids_to_tokens(enc.ids))] * len(enc.ids)
    check(f"{name}: the store holds the tokenizer's ids of the text ({len(want_ids)} ids)", ids == want_ids,
          f"{len(ids)} vs {len(want_ids)} ids")
    if ids == want_ids:
        diff = [i for i, (a, b) in enumerate(zip(trainable, want_mask)) if a != b]
        check(f"{name}: exactly the assistant's tokens are trained ({sum(want_mask)} of {len(ids)})", not diff,
              diff and f"first at id {diff[0]}: vktrain {trainable[diff[0]]}, oracle {want_mask[diff[0]]}; "
                       f"sample {where[diff[0]][0]}\n  tokens {where[diff[0]][1]}")
    if name == "qwen2.5":
        res, err = vk_data(tok_dir, convs, work, "dataset.train_on_input=true")
        check(f"{name}: train_on_input trains every token", res is not None and all(res[1]), err)


def check_errors(fams, dirs, convs, work):
    d = write_folder(os.path.join(work, "zephyr"), fams["llama2"][0], ZEPHYR, {"bos_token": "<s>",
                                                                               "eos_token": "</s>"})
    res, err = vk_data(d, convs[:1], work)
    check("an unknown template is an error naming the file and suggesting tokenizer.chat_template",
          res is None and "tokenizer_config.json" in err and "tokenizer.chat_template" in err, err)
    res, err = vk_data(d, convs[:2], work, "tokenizer.chat_template=llama2")
    check("tokenizer.chat_template overrides an unknown template", res is not None and res[2] == "llama2", err)
    hf = AutoTokenizer.from_pretrained(dirs["llama2"])
    check("... and writes Llama 2's text", res is not None and res[0] == hf(
        "".join(hf.apply_chat_template(c, tokenize=False) for c in convs[:2]), add_special_tokens=False).input_ids)
    res, err = vk_data(dirs["llama3"], convs[:1], work, "tokenizer.chat_template=plain")
    l3 = AutoTokenizer.from_pretrained(dirs["llama3"])
    want = ([l3.bos_token_id] + l3("user: Hello!\nassistant: Hi there. How can I help?\n",
                                   add_special_tokens=False).input_ids + [l3.eos_token_id])
    check("tokenizer.chat_template: plain writes BOS, 'role: content' lines, EOS", res is not None and
          res[2] == "plain" and res[0] == want, err or f"{res and res[0]} != {want}")
    res, err = vk_data(dirs["llama3"], convs[:1], work, "tokenizer.chat_template=chatml")
    check("a template whose special strings are not tokens is refused", res is None and "'<|im_start|>'" in err, err)
    res, err = vk_data(dirs["llama2"], [[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]], work)
    check("Llama 2's role order is checked, with file:line", res is None and "chat.jsonl:1:" in err and
          "alternate" in err, err)
    sys_conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    res, err = vk_data(dirs["gemma2"], [sys_conv], work)
    check("Gemma 2's template has no system role: an error with file:line", res is None and "chat.jsonl:1:" in err
          and "system" in err, err)
    res, err = vk_data(dirs["gemma3"], [[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]], work)
    check("Gemma's role order is checked", res is None and "chat.jsonl:1:" in err and "alternate" in err, err)
    variants = [("Gemma 3 with a '\\n' system separator", "gemma3", GEMMA3.replace(r"'\n\n' -%}", r"'\n' -%}")),
                ("Qwen3 with a thinking generation prompt", "qwen3", QWEN3.replace(
                    "enable_thinking is defined and enable_thinking is false", "enable_thinking is defined")),
                ("Phi-3's first template (no system turn)", "phi3", PHI3.replace(r"'<|user|>\n' + message", r"'<|user|>' + '\n' + message"))]
    for what, base, tmpl in variants:
        d = write_folder(os.path.join(work, "variant"), fams[base][0], tmpl, fams[base][2])
        res, err = vk_data(d, convs[:1], work)
        check(f"a template vktrain does not write exactly is refused: {what}", res is None and
              "tokenizer.chat_template" in err, err)
    r = driver("render", "byte", "llama3", 0, os.path.join(work, "convs.jsonl"))
    check("a template with the byte tokenizer is refused", r.returncode == 1 and "byte tokenizer" in r.stderr,
          r.stderr)


def end_to_end(dirs, work):
    """Two conversations learned by heart; generate --chat must give the
    reply of the one asked, and stop at <|eot_id|>."""
    data = os.path.join(work, "e2e.jsonl")
    pairs = [("Hello!", "Hi there."), ("Bye!", "See you soon.")]
    with open(data, "w") as f:
        for _ in range(8):
            for q, a in pairs:
                f.write(json.dumps({"messages": [{"role": "user", "content": q},
                                                 {"role": "assistant", "content": a}]}) + "\n")
    out = os.path.join(work, "e2e_out")
    recipe = os.path.join(work, "e2e.yaml")
    with open(recipe, "w") as f:
        f.write(f"""seed: 1
output_dir: {out}
model: {{arch: llama, dim: 64, n_layers: 2, n_heads: 4, max_seq_len: 128}}
tokenizer: {{type: hf, path: {dirs['llama3.2']}}}
dataset: {{type: sft_jsonl, path: {data}, shuffle: true}}
batch_size: 8
max_steps: 120
optimizer: {{lr: 1.0e-2, weight_decay: 0.0}}
lr_scheduler: {{type: constant}}
log_every_n_steps: 20
""")
    r = subprocess.run([VKTRAIN, "train", "--config", recipe], capture_output=True, text=True,
                       env=dict(os.environ, LP_NUM_THREADS="2"))
    check("end to end: training on chat data", r.returncode == 0 and "llama3 template" in r.stdout + r.stderr,
          (r.stdout + r.stderr)[-2000:])
    if r.returncode:
        return
    check("end to end: the model folder carries tokenizer_config.json (its chat template)",
          os.path.exists(os.path.join(out, "tokenizer_config.json")))
    for q, a in pairs:
        g = subprocess.run([VKTRAIN, "generate", "--model", out, "--chat", q, "--temperature", "0",
                            "--max-new-tokens", "20"], capture_output=True, text=True)
        check(f"end to end: generate --chat {q!r} answers {a!r} and stops at <|eot_id|>",
              g.returncode == 0 and g.stdout == a + "\n", repr(g.stdout) + g.stderr[-1000:])
    g = subprocess.run([VKTRAIN, "generate", "--model", out, "--chat", "x", "--prompt", "y"], capture_output=True,
                       text=True)
    check("generate: --chat and --prompt together is a usage error", g.returncode == 2 and "not both" in g.stderr,
          g.stderr)


def stop_tokens(fams, work):
    """generate --chat stops at the template's end-of-turn token, at the
    tokenizer's eos and at generation_config.json's eos_token_id ids. The
    model is built to draw one token X greedily after any input: every
    embedding row is ones, the attention and MLP outputs are zero (so the
    residual stream is the embedding, and the final RMSNorm of it ones), and
    only lm_head's row X is non-zero. Llama 3 tokenizer: <|end_of_text|> is
    one id, <|eot_id|> another."""
    from safetensors.numpy import save_file
    tok = fams["llama3"][0]
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    vocab, dim, hidden = max(tok["model"]["vocab"].values()) + 1, 8, 16
    eot, eot_text = ids["<|eot_id|>"], ids["<|end_of_text|>"]
    plain = tok["model"]["vocab"]["a"]
    z = np.zeros
    cases = [  # (what, X, tokenizer_config's eos, generation_config's eos_token_id, stops)
        ("the tokenizer's eos <|end_of_text|>", eot_text, "<|end_of_text|>", None, True),
        ("generation_config's eos_token_id [eot, end_of_text]", eot_text, "<|eot_id|>", [eot, eot_text], True),
        ("the end-of-turn <|eot_id|> when eos is <|end_of_text|>", eot, "<|end_of_text|>", None, True),
        ("control: an ordinary token", plain, "<|end_of_text|>", [eot, eot_text], False),
    ]
    for what, x, eos, gen_eos, stops in cases:
        d = write_folder(os.path.join(work, f"stop{x}_{eos[2:5]}_{gen_eos is not None}"), tok, LLAMA3,
                         {"bos_token": "<|begin_of_text|>", "eos_token": eos})
        w = {"model.embed_tokens.weight": np.ones((vocab, dim), np.float32),
             "model.norm.weight": np.ones(dim, np.float32), "lm_head.weight": z((vocab, dim), np.float32)}
        w["lm_head.weight"][x] = 1
        p = "model.layers.0."
        for k, shape in (("self_attn.q_proj", (dim, dim)), ("self_attn.k_proj", (dim, dim)),
                         ("self_attn.v_proj", (dim, dim)), ("self_attn.o_proj", (dim, dim)),
                         ("mlp.gate_proj", (hidden, dim)), ("mlp.up_proj", (hidden, dim)),
                         ("mlp.down_proj", (dim, hidden))):
            w[p + k + ".weight"] = z(shape, np.float32)
        w[p + "input_layernorm.weight"] = w[p + "post_attention_layernorm.weight"] = np.ones(dim, np.float32)
        save_file(w, os.path.join(d, "model.safetensors"))
        cfg = dict(model_type="llama", hidden_size=dim, intermediate_size=hidden, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=256,
                   rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu")
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        if gen_eos is not None:
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump({"eos_token_id": gen_eos}, f)
        g = subprocess.run([VKTRAIN, "generate", "--model", d, "--chat", "hi", "--temperature", "0",
                            "--max-new-tokens", "5"], capture_output=True, text=True)
        want = "\n" if stops else "a" * 5 + "\n"
        check(f"generate --chat stops at {what}" if stops else f"generate --chat: {what} does not stop it",
              g.returncode == 0 and g.stdout == want, repr(g.stdout) + g.stderr[-1000:])


def main():
    if not VKTRAIN or not os.path.exists(DRIVER):
        print("FAIL: run under ctest (needs VKTRAIN and TOOLS/chat_driver)")
        return 1
    if transformers.__version__ != WANT_TRANSFORMERS:
        print(f"FAIL: the oracle is transformers=={WANT_TRANSFORMERS}, found {transformers.__version__} "
              f"(later versions date Llama 3.2's system turn with today's date)")
        return 1
    rng = random.Random(11)
    work = tempfile.mkdtemp(prefix="vkt_chat_")
    try:
        fams, dirs = build_families(rng, work)
        convs = conversations()
        for name, fam in fams.items():
            check_family(name, fam, dirs[name], convs, work)
        check_errors(fams, dirs, convs, work)
        end_to_end(dirs, work)
        stop_tokens(fams, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
