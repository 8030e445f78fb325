"""Which programs the code, the templates, the scripts and the tests call, read from their text.

Shell (scripts, job templates, hook scripts): bash --pretty-print parses it (comments gone, one
command a line), then a small quote-aware scanner takes the word in command position of every simple
command, through pipes, lists, $(...), <(...), and wrappers such as sudo, env, exec, timeout and
setpriv. Python: the literal first element of a subprocess call's argument list. Notebooks: both,
for code cells and their `!` lines. What is built at run time (f"{bin_dir}/sbatch") is not seen.
"""

import ast
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_PREFIX = "\x01prefix"
_JINJA_STATEMENT = re.compile(r"\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_JINJA_VALUE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
# Words after which the next word is again a command (keywords and wrappers that run their argument).
_COMMAND_NEXT = {"if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "exec", "command",
                 "nohup", "setsid", "builtin"}
_NO_COMMAND_UNTIL_NEWLINE = {"for", "select", "function"}
# Wrappers: options (and option values) to skip before the program they run.
_WRAPPER_VALUE_OPTIONS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"},
    "runuser": {"-u", "-g", "-G", "-c", "-s", "-w"},
    "env": {"-u", "-C", "-S"},
    "timeout": {"-k", "-s", "--signal", "--kill-after"},
    "setpriv": set(),
    "xargs": {"-I", "-n", "-P", "-d", "-L", "-s", "-E", "-a"},
    "flock": {"-w", "-E", "--timeout"},
    "nice": {"-n"},
    "ionice": {"-c", "-n"},
    "stdbuf": {"-i", "-o", "-e"},
    "srun": {"-n", "-N", "-c", "-p", "-t", "-J", "--ntasks", "--nodes"},
}


def shell_programs(text: str) -> set[str]:
    """Program names in command position in a bash script (Jinja tags removed first)."""
    text = _JINJA_VALUE.sub("%JINJA%", _JINJA_STATEMENT.sub("\n", text))
    printed = subprocess.run(["bash", "--pretty-print", "/dev/stdin"], input=text, capture_output=True,
                             text=True, check=False)
    if printed.returncode != 0:
        raise ValueError(f"bash cannot parse it: {printed.stderr.strip()}")
    return set(_commands(_drop_heredocs(printed.stdout)))


def _drop_heredocs(text: str) -> str:
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        for match in re.finditer(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", line):
            end = match.group(2)
            while i + 1 < len(lines) and lines[i + 1].strip() != end:
                i += 1
            i += 1
        i += 1
    return "\n".join(out)


def _balanced(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the `close` matching the `open_` before text[i], quotes respected."""
    depth, quote = 1, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            i += 1
        elif text.startswith(open_, i):
            depth += 1
        elif text.startswith(close, i):
            depth -= 1
            if depth == 0:
                return i + len(close)
        i += 1
    return i


def _commands(text: str) -> Iterator[str]:
    """Yields the command word of every simple command in `text` (pretty-printed bash)."""
    words, i, word, nested = [], 0, "", []

    def flush() -> None:
        nonlocal word
        if word:
            words.append(word)
            word = ""

    while i < len(text):
        ch = text[i]
        if text.startswith("$((", i) or (text.startswith("((", i) and not word):
            start = i + (3 if ch == "$" else 2)
            i = _balanced(text, start, "((", "))")
            word += "0" if ch == "$" else "(("
        elif text.startswith("$(", i) or text.startswith("<(", i) or text.startswith(">(", i):
            end = _balanced(text, i + 2, "(", ")")
            nested.append(text[i + 2:end - 1])
            word += "X"
            i = end
        elif text.startswith("${", i):
            end = _balanced(text, i + 2, "{", "}")
            # "${RUN[@]}" alone in command position is a command prefix held in an array.
            word += _PREFIX if text[i:end].endswith("[@]}") and not word else "X"
            i = end
        elif ch == "(" and word.endswith("=") and _ASSIGNMENT.match(word):
            i = _balanced(text, i + 1, "(", ")")  # an array assignment: its words are values
            word += "()"
        elif ch == "`":
            end = text.index("`", i + 1)
            nested.append(text[i + 1:end])
            word += "X"
            i = end + 1
        elif ch == "'":
            end = text.index("'", i + 1)
            word += text[i + 1:end] or "''"
            i = end + 1
        elif ch == '"' and text.startswith('"${', i) and text.startswith(
                "[@]}\"", (close := _balanced(text, i + 3, "{", "}")) - 4):
            word += _PREFIX  # "${RUN[@]}"
            i = close + 1
        elif ch == '"':
            j = i + 1
            while text[j] != '"':
                if text.startswith("$(", j):
                    end = _balanced(text, j + 2, "(", ")")
                    nested.append(text[j + 2:end - 1])
                    j = end
                    continue
                j += 2 if text[j] == "\\" else 1
            word += text[i + 1:j] or '""'
            i = j + 1
        elif ch == "\\":
            word += text[i + 1:i + 2]
            i += 2
        elif ch in " \t":
            flush()
            i += 1
        elif ch in "\n;&|(){}<>" and not (ch in "{}" and word):
            flush()
            op = ch
            while i + 1 < len(text) and text[i + 1] in ";&|<>" and ch not in "(){}\n":
                i += 1
                op += text[i]
            words.append(f"\0{op}")
            i += 1
        else:
            word += ch
            i += 1
    flush()
    yield from _command_words(words)
    for inner in nested:
        yield from _commands(inner)


def _command_words(words: list[str]) -> Iterator[str]:
    expect, skip_until_newline, in_test, case_state = True, False, False, []
    wrapper, wrapper_value = "", False
    redirect = False
    for raw in words:
        if raw.startswith("\0"):
            op = raw[1:]
            redirect = op[0] in "<>" or op in ("&>", "&>>")
            if redirect:
                continue
            if op in (";;", ";&", ";;&") and case_state:
                case_state[-1] = "pattern"
            elif op == ")" and case_state and case_state[-1] == "pattern":
                case_state[-1] = "body"
            if op == "\n":
                skip_until_newline = False
            if not in_test:
                expect = True
                wrapper = ""
            continue
        if redirect:
            redirect = False
            continue
        if case_state and case_state[-1] == "in":
            if raw == "in":
                case_state[-1] = "pattern"
            continue
        if case_state and case_state[-1] == "pattern":
            if raw == "esac":
                case_state.pop()
            continue
        if raw == "esac" and case_state:
            case_state.pop()
            continue
        if in_test:
            in_test = raw != "]]"
            if not in_test:
                expect = False
            continue
        if skip_until_newline:
            continue
        if not expect:
            continue
        if wrapper:
            if wrapper_value:
                wrapper_value = False
                continue
            if raw == "--" or _ASSIGNMENT.match(raw):
                continue
            if raw.startswith("-"):
                wrapper_value = raw in _WRAPPER_VALUE_OPTIONS[wrapper]
                continue
            if wrapper == "timeout" and re.match(r"^[0-9.]+[smhd]?$", raw):
                continue
            if wrapper == "flock" and re.match(r"^[0-9]+$|^/", raw):
                continue
            wrapper = ""
        if _ASSIGNMENT.match(raw) or raw == _PREFIX:
            continue
        if raw == "[[":
            in_test = True
            continue
        if raw == "case":
            case_state.append("in")
            continue
        if raw in _NO_COMMAND_UNTIL_NEWLINE:
            skip_until_newline = True
            continue
        if raw in _COMMAND_NEXT:
            continue
        if raw in ("fi", "done", "}", "esac", "in"):
            expect = False
            continue
        if raw in _WRAPPER_VALUE_OPTIONS:
            wrapper = raw
            yield raw
            continue
        expect = False
        if _NAME.match(raw) or raw.startswith("/"):
            yield raw


_SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call"}


def python_programs(source: str) -> set[str]:
    """The literal program of every subprocess call with a literal argument list."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List | ast.Tuple)):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in _SUBPROCESS_CALLS:
            continue
        argv = [elt.value if isinstance(elt, ast.Constant) and isinstance(elt.value, str) else None
                for elt in node.args[0].elts]
        program = _unwrap(argv)
        if program:
            found.add(program)
    return found


def _unwrap(argv: list[str | None]) -> str | None:
    """The program an argv runs, past sudo/runuser/env wrappers (None when it is not literal)."""
    while argv and argv[0] is not None:
        head = argv[0].rsplit("/", 1)[-1]
        if head not in _WRAPPER_VALUE_OPTIONS or len(argv) == 1:
            return argv[0]
        rest, skip = argv[1:], False
        while rest and rest[0] is not None and (skip or rest[0].startswith("-") or "=" in rest[0]):
            skip = not skip and rest[0] in _WRAPPER_VALUE_OPTIONS[head]
            rest = rest[1:]
        argv = rest
    return None


def notebook_programs(path: Path) -> set[str]:
    found: set[str] = set()
    notebook = json.loads(path.read_text())
    if notebook["metadata"].get("kernelspec", {}).get("language", "python").lower() != "python":
        return found  # R's system() calls are not read
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        shell, python, continued = [], [], False
        for line in "".join(cell["source"]).split("\n"):
            if continued or line.lstrip().startswith("!"):
                shell.append(line if continued else line.lstrip()[1:])
                continued = line.endswith("\\")
            elif not line.lstrip().startswith("%"):
                python.append(line)
        found |= python_programs("\n".join(python))
        if shell:
            found |= shell_programs("\n".join(shell))
    return found
