"""README as a test: every command and snippet in README.md's fenced blocks runs as written.

One real ``voxclone serve`` on a free loopback port and a throw-away data home;
the README's commands run in order in one working directory, through bash (the
Python snippets through this interpreter), with only these substitutions:

* ``127.0.0.1:8000`` -> the server's address (``VOXCLONE_PORT`` is set too, so
  ``voxclone say`` finds the server "on the configured port");
* ``.venv/bin/`` -> this interpreter's ``bin/``; ``VOXCLONE_HOME`` -> the
  server's home (the CLI's lexicon and blends share its database);
* the placeholders ``j_…`` and ``$AUDIO_URL`` -> the job just created and its
  audio link; the Wyoming server's ``0.0.0.0:10200`` -> a free loopback port.

``curl`` gets ``--fail-with-body`` (a shim first on ``PATH``), so a refused
request fails its command instead of writing an error body to ``hello.mp3``;
each command's check then looks at what it says it makes (audio that decodes,
the JSON the README shows). Inputs the README assumes are made here:
``reference.wav`` / ``more.wav`` (two halves of one LibriSpeech utterance),
``bob.wav`` (another speaker), ``chapter.txt``, ``chapter1.txt``, ``book.md``.

Commands that cannot run in a test are in ``NOT_RUN`` with the reason; a README
command that is in neither table fails :func:`test_every_readme_command_is_walked_or_listed`
(fast, no server), so the README cannot gain a command nobody ran. The server
refines clones with 2 auditions instead of 24 and a 10 s budget instead of 180 s
and runs the auditions rather than the deep refine (``VOXCLONE_REFINE_*``) to
keep the walk short; that changes what ``--refine`` finds, not whether it runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import soundfile as sf

from voxclone.devserver import ServerNotReady, ServerProcess, free_loopback_port, running_server

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DATA = ROOT / "tests" / "data"
SERVE_LAUNCHER = "import sys; from voxclone.api.cli import main; sys.exit(main(['serve']))"
README_ADDRESS = "127.0.0.1:8000"
COMMAND_TIMEOUT_S = 120.0
CLONING_READY_S = 180.0

# Commands of the README that this test does not run, and why.
NOT_RUN: dict[str, str] = {
    "make run": "installs .venv and starts the server; the walk starts `voxclone serve` itself",
    "make image && make image-run": "builds a container image (root, podman, ~15 min): "
    "tests/container/test_image_smoke.py",
    "scripts/container/podman.sh logs voxclone": "needs the container `make image-run` starts",
    "make test": "runs the whole suite, this test included",
    "make deep-deps": "installs torch and Kokoro's model code; the test environment has "
    "them from make test-deps",
    ".venv/bin/voxclone clone reference.wav --name alice --consent --deep": "a deep refine "
    "takes ~2 minutes on 2 cores, past a command's budget here; "
    "tests/integration/test_deep_refine_service.py runs one through the service and "
    "tests/api/test_cli_rate_limit.py checks that --deep asks the server for it",
    ".venv/bin/pip install -e '.[pocket]'": "changes the environment under test (needs an index)",
    ".venv/bin/voxclone models import pocket-tts ./pocket-files --config english": (
        "needs Pocket TTS weights from Kyutai's hub (internet, terms to accept)"
    ),
    "VOXCLONE_ENGINES=kokoro,pocket-tts .venv/bin/voxclone serve": "needs those weights",
    "python: from elevenlabs.client import ElevenLabs": "needs a TLS server and the reader's "
    "own `llm_tokens()` / `play()`: tests/api/test_realtime_elevenlabs_sdk.py runs the SDK",
    "curl -s -X POST 127.0.0.1:8000/v1/consent/phrases": "needs VOXCLONE_CONSENT_MODE=spoken "
    "(the walk's server takes typed consent): tests/api/test_spoken_consent.py",
    "curl -s 127.0.0.1:8000/v1/voices -F audio=@bob.wav -F name=bob -F consent_audio=@bob-reads-"
    "the-phrase.wav -F consent_phrase_id=cp_…": "needs Bob reading his phrase (a recording made "
    "for it): tests/api/test_spoken_consent.py enrolls with one",
}


# -- the README's blocks and commands ------------------------------------------------
@dataclass(frozen=True)
class Block:
    lang: str
    line: int
    text: str


def readme_blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append(Block(opening.group(1), i + 1, "\n".join(lines[i + 1 : end])))
        i = end + 1
    return blocks


def _scan(command: str) -> tuple[str, bool]:
    """The command without its comments, and whether a quote is still open."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch == "\\" and i + 1 < len(command):
                out.append(ch)
                i += 1
                ch = command[i]
            elif ch == '"':
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (not out or out[-1].isspace()):
            while i < len(command) and command[i] != "\n":
                i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out), bool(quote)


def shell_commands(block: str) -> list[str]:
    """One entry per command: continuation lines and multi-line quotes joined."""
    commands: list[str] = []
    pending = ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        stripped, open_quote = _scan(pending)
        if open_quote or stripped.rstrip().endswith("\\"):
            continue
        commands.append(pending)
        pending = ""
    assert not pending, f"unfinished command: {pending!r}"
    return commands


def key(command: str) -> str:
    """A command as the tables name it: comments dropped, whitespace collapsed."""
    stripped, _ = _scan(command)
    return " ".join(stripped.replace("\\\n", " ").split())


def readme_commands() -> list[tuple[str, str]]:
    """(kind, text) of every command and snippet, in README order."""
    found: list[tuple[str, str]] = []
    for block in readme_blocks(README.read_text()):
        if block.lang == "bash":
            found.extend(("bash", command) for command in shell_commands(block.text))
        elif block.lang == "python":
            found.append(("python", block.text))
        elif block.lang != "text":  # text: output the walk compares with the server's
            raise AssertionError(
                f"README line {block.line}: fence ```{block.lang}``` is not "
                "bash, python or text; say how the walk treats it"
            )
    return found


# -- what each walked command must produce ------------------------------------------
@dataclass
class Walk:
    work: Path
    env: dict[str, str]
    url: str
    job_id: str = ""
    says: int = 0
    via_server: int = 0


def _audio(walk: Walk, *names: str) -> None:
    for name in names:
        path = walk.work / name
        assert path.is_file(), f"{name} was not written"
        info = sf.info(str(path))  # decodes WAV and MP3
        assert info.duration > 0.3, f"{name}: {info.duration:.2f} s"


def files(*names: str) -> Callable[[Walk, str], None]:
    return lambda walk, _out: _audio(walk, *names)


def says(*texts: str) -> Callable[[Walk, str], None]:
    def check(_walk: Walk, out: str) -> None:
        for text in texts:
            assert text in out, f"{text!r} not in output:\n{out[-2000:]}"

    return check


def _cloned(name: str) -> Callable[[Walk, str], None]:
    def check(_walk: Walk, out: str) -> None:
        body = json.loads(out)  # the README: 201 {"id": "v_…", "name": ..., "quality": …}
        assert body["id"].startswith("v_") and body["name"] == name and "quality" in body

    return check


def _job_queued(walk: Walk, out: str) -> None:
    body = json.loads(out)  # the README: 202 {"id": "j_…", "state": "queued", …}
    assert body["id"].startswith("j_") and body["state"] in {"queued", "running"}, body
    walk.job_id = body["id"]


def _captioned(_walk: Walk, out: str) -> None:
    body = json.loads(out)
    assert body["audio_format"] == "mp3" and body["audio"]
    words = [stamp["word"] for stamp in body["timestamps"]]
    assert words[:2] == ["In", "1984"], words  # words as written, as the README says
    assert all(s["end_time"] >= s["start_time"] for s in body["timestamps"])


def _srt(walk: Walk, _out: str) -> None:
    text = (walk.work / "rain.srt").read_text()
    assert "-->" in text and "1984" in text, text


def _rain(walk: Walk, out: str) -> None:
    _audio(walk, "rain.wav")
    _srt(walk, out)


def _audiobook(walk: Walk, _out: str) -> None:
    import av

    with av.open(str(walk.work / "book.m4b")) as f:
        assert [c["metadata"]["title"] for c in f.chapters()] == ["Dawn", "Dusk"]
    manifest = json.loads((walk.work / "book.json").read_text())
    assert [c["title"] for c in manifest["chapters"]] == ["Dawn", "Dusk"], manifest


def _blend_saved(_walk: Walk, out: str) -> None:
    body = json.loads(out)
    assert body["name"] == "narrator", body


WALKED: dict[str, Callable[[Walk, str], None]] = {
    '.venv/bin/voxclone say "The quick brown fox jumps over the lazy dog." -o fox.wav': files(
        "fox.wav"
    ),
    ".venv/bin/voxclone say - -o chapter.mp3 --voice clear_male --speed 1.1 < chapter.txt": files(
        "chapter.mp3"
    ),
    ".venv/bin/voxclone voices list": says("clear_female", "clear_male"),
    ".venv/bin/voxclone clone reference.wav --name alice --consent --refine": says("alice"),
    ".venv/bin/voxclone clone more.wav --add-to alice": says("alice"),
    ".venv/bin/voxclone voices show alice": says("alice"),
    '.venv/bin/voxclone say "Hello from Alice." --voice alice -o alice.wav': files("alice.wav"),
    "curl -s 127.0.0.1:8000/v1/tts -H 'content-type: application/json' -d '{\"text\": "
    '"Hello there.", "voice": "clear_female", "format": "mp3"}\' -o hello.mp3': files("hello.mp3"),
    "curl -s 127.0.0.1:8000/v1/voices -F audio=@bob.wav -F name=bob -F consent=true -F "
    "'consent_statement=I agree that my voice is cloned for this project.' -F "
    "'given_by=Bob Example'": _cloned("bob"),
    "curl -s 127.0.0.1:8000/v1/tts -H 'content-type: application/json' -d '{\"text\": "
    '"Hello from Bob.", "voice": "bob"}\' -o bob.wav': files("bob.wav"),
    "curl -s -X POST 127.0.0.1:8000/v1/jobs/speech -H 'content-type: application/json' -H "
    '\'Idempotency-Key: chapter-1\' -d "{\\"text\\": $(jq -Rs . < chapter1.txt), '
    '\\"format\\": \\"mp3\\"}"': _job_queued,
    # polled by _walk_job until the job succeeds
    "curl -s 127.0.0.1:8000/v1/jobs/j_…": says('"state"'),
    'curl -s -o chapter1.mp3 "$AUDIO_URL"': files("chapter1.mp3"),
    "curl -s 127.0.0.1:8000/v1/audio/speech/captioned -H 'content-type: application/json' -d "
    '\'{"input": "In 1984 it rained.", "voice": "clear_female", "response_format": "mp3"}\'': (
        _captioned
    ),
    "curl -s '127.0.0.1:8000/v1/audio/speech/captioned?format=srt' -H 'content-type: "
    'application/json\' -d \'{"input": "In 1984 it rained."}\' -o rain.srt': _srt,
    '.venv/bin/voxclone say "In 1984 it rained." -o rain.wav --subtitles rain.srt': _rain,
    "python: OpenAI client": files("hi.mp3"),
    "python: import voxclone": files("hello.wav"),
    '.venv/bin/voxclone say \'<speak>Wait for it <break time="800ms"/> the <sub alias="World '
    'Health Organization">WHO</sub> says <voice name="clear_male"><prosody rate="slow">hello'
    "</prosody></voice>.</speak>' -o ssml.wav": files("ssml.wav"),
    "curl -s 127.0.0.1:8000/v1/lexicon -H 'content-type: application/json' -d '{\"word\": "
    '"Nguyen", "language": "en", "respelling": "win"}\'': says("Nguyen"),
    "curl -s 127.0.0.1:8000/v1/lexicon": says("Nguyen"),
    "curl -s -X DELETE 127.0.0.1:8000/v1/lexicon/en/Nguyen": says(),
    ".venv/bin/voxclone lexicon add tomato 'təˈmɑːtoʊ'": says(),
    ".venv/bin/voxclone lexicon add Nguyen win --respelling": says(),
    ".venv/bin/voxclone lexicon list": says("tomato", "Nguyen"),
    '.venv/bin/voxclone say "I like tomato." -o tomato.wav': files("tomato.wav"),
    ".venv/bin/voxclone lexicon remove tomato": says(),
    '.venv/bin/voxclone say "Two voices, one speaker." --voice "clear_female(1)+clear_male(1)" '
    "-o blend.wav": files("blend.wav"),
    "curl -s 127.0.0.1:8000/v1/voices/blend -H 'content-type: application/json' -d '{\"name\": "
    '"narrator", "blend": "alice(2)+clear_male(1)"}\'': _blend_saved,
    ".venv/bin/voxclone voices blend duet 'alice(1)+bob(1)'": says(),
    '.venv/bin/voxclone say "Saved and cached." --voice narrator -o narrator.wav': files(
        "narrator.wav"
    ),
    # run by _walk_wyoming: started, asked to describe itself, stopped
    ".venv/bin/voxclone wyoming --uri tcp://0.0.0.0:10200 --owner local": says(),
    ".venv/bin/voxclone models list": says("kokoro"),
    ".venv/bin/voxclone audiobook book.md --voice clear_female -o book.m4b --manifest book.json": (
        _audiobook
    ),
}
PYTHON_KEYS = {"from openai import OpenAI": "python: OpenAI client"}


def _name(kind: str, text: str) -> str:
    if kind == "python":
        first = text.strip().splitlines()[0]
        return PYTHON_KEYS.get(first, f"python: {first}")
    return key(text)


def test_every_readme_command_is_walked_or_listed() -> None:
    names = [_name(kind, text) for kind, text in readme_commands()]
    unknown = [n for n in names if n not in WALKED and n not in NOT_RUN]
    assert not unknown, (
        "README commands neither walked nor listed in NOT_RUN (add a check to WALKED, or a "
        "reason to NOT_RUN):\n" + "\n".join(unknown)
    )
    stale = [n for n in [*WALKED, *NOT_RUN] if n not in names]
    assert not stale, "entries for commands no longer in the README:\n" + "\n".join(stale)


def test_the_splitter_keeps_quoted_lines_and_continuations_together() -> None:
    block = "a 'x\n# not a comment' -o f  # comment\n# a comment line\nb \\\n  --flag\n"
    assert shell_commands(block) == ["a 'x\n# not a comment' -o f  # comment", "b \\\n  --flag"]
    assert key(shell_commands(block)[1]) == "b --flag"


# -- the walk -------------------------------------------------------------------------
def _inputs(work: Path) -> None:
    speech, sr = sf.read(str(DATA / "librispeech_1088-129236-0000.wav"))
    half = len(speech) // 2
    sf.write(str(work / "reference.wav"), speech[:half], sr)
    sf.write(str(work / "more.wav"), speech[half:], sr)
    shutil.copy(DATA / "librispeech_3005-163389-0000.wav", work / "bob.wav")
    (work / "chapter.txt").write_text("Chapter one. It was a bright cold day in April.\n")
    (work / "chapter1.txt").write_text(
        "The lighthouse keeper climbed the stairs at dusk. "
        "Far below, the sea turned grey and then black.\n"
    )
    (work / "book.md").write_text("# A Day\n\n## Dawn\n\nThe sun rose.\n\n## Dusk\n\nIt set.\n")
    shim = work / "shim"
    shim.mkdir()
    real_curl = shutil.which("curl")
    assert real_curl, "the README's HTTP examples need curl"
    (shim / "curl").write_text(f'#!/bin/sh\nexec {real_curl} --fail-with-body "$@"\n')
    (shim / "curl").chmod(0o755)


def _substitute(walk: Walk, text: str) -> str:
    text = text.replace(README_ADDRESS, walk.url.removeprefix("http://"))
    text = text.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    return text.replace("j_…", walk.job_id or "j_…")


def _run(walk: Walk, kind: str, text: str) -> str:
    argv = [sys.executable, "-c", text] if kind == "python" else ["bash", "-c", text]
    done = subprocess.run(
        argv,
        cwd=walk.work,
        env=walk.env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"exit {done.returncode}: {text}\nstdout: {done.stdout[-2000:]}\n"
        f"stderr: {done.stderr[-3000:]}"
    )
    return done.stdout + done.stderr


def _walk_job(walk: Walk, text: str) -> str:
    """The README polls the job: repeat the same request until it has succeeded."""
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while True:
        out = _run(walk, "bash", text)
        body = json.loads(out)
        assert body["state"] in {"queued", "running", "succeeded"}, body
        if body["state"] == "succeeded":
            assert body["audio_url"] and body["expires_at"], body
            walk.env["AUDIO_URL"] = body["audio_url"]
            return out
        assert time.monotonic() < deadline, f"job still {body['state']}"
        time.sleep(0.5)


def _walk_wyoming(walk: Walk, text: str) -> str:
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info

    port = free_loopback_port()
    assert "tcp://0.0.0.0:10200" in text
    command = text.replace("tcp://0.0.0.0:10200", f"tcp://127.0.0.1:{port}")
    log = walk.work / "wyoming.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=walk.work,
            env=walk.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    async def describe() -> Info:
        async with AsyncTcpClient("127.0.0.1", port, connect_timeout=2, read_timeout=30) as c:
            await c.write_event(Describe().event())
            while True:
                event = await c.read_event()
                assert event is not None
                if Info.is_type(event.type):
                    return Info.from_event(event)

    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            assert process.poll() is None, f"wyoming exited:\n{log.read_text()[-2000:]}"
            try:
                info = asyncio.run(describe())
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.5)
    finally:
        process.terminate()
        process.wait(timeout=30)
    names = {voice.name for voice in info.tts[0].voices}
    assert {"clear_female", "alice"} <= names, sorted(names)  # --owner local: the CLI's clone
    return ""


def _cloning_ready(url: str) -> None:
    import httpx

    deadline = time.monotonic() + CLONING_READY_S
    while httpx.get(f"{url}/readyz", params={"capability": "cloning"}).status_code != 200:
        assert time.monotonic() < deadline, "cloning never became ready"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    home = tmp_path_factory.mktemp("readme-home")
    env = {
        "VOXCLONE_REFINE_AUDITIONS": "2",
        "VOXCLONE_REFINE_PROSODY_AUDITIONS": "1",
        "VOXCLONE_REFINE_BUDGET_S": "10",
        # The auditions: a deep refine takes minutes (test_deep_refine_service.py).
        "VOXCLONE_REFINE_METHOD": "atlas",
    }
    try:
        with running_server(home, env, launcher=SERVE_LAUNCHER, timeout_s=240) as server:
            yield server, home
    except ServerNotReady as exc:
        pytest.fail(str(exc))


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.models
@pytest.mark.timeout(600)
def test_the_readme_runs_as_written(served: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    server, home = served
    _inputs(tmp_path)
    env = {
        **os.environ,
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_PORT": str(server.port),
        "PATH": f"{tmp_path / 'shim'}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("VOXCLONE_API_KEY", None)
    walk = Walk(tmp_path, env, server.url)

    # The README's output blocks: the ready line `make run` (voxclone serve)
    # prints. It follows readiness (api/server.py's announcer looks every
    # 0.1 s), so the log may not hold it yet when /readyz first answers 200: a
    # CI run read the log at that moment and failed.
    for block in readme_blocks(README.read_text()):
        if block.lang == "text":
            expected = _substitute(walk, block.text)
            deadline = time.monotonic() + 10.0
            while expected not in (log := server.log_tail(1_000_000)):
                assert time.monotonic() < deadline, (block.text, log[-2000:])
                time.sleep(0.1)

    timings: list[tuple[float, str]] = []
    for kind, text in readme_commands():
        name = _name(kind, text)
        if name in NOT_RUN:
            continue
        assert name in WALKED, f"not walked: {name}"  # the fast test says which table
        if " clone " in name or "/v1/voices -F" in name:
            _cloning_ready(server.url)  # a clone sent earlier waits; bound that wait here
        started = time.monotonic()
        command = _substitute(walk, text)
        if "wyoming" in name:
            out = _walk_wyoming(walk, command)
        elif "/v1/jobs/j_" in command:
            out = _walk_job(walk, command)
        else:
            out = _run(walk, kind, command)
        WALKED[name](walk, out)
        if " say " in f" {name} ":
            walk.says += 1
            walk.via_server += f"via {server.url}" in out
        timings.append((time.monotonic() - started, name))
    slowest = sorted(timings, reverse=True)[:5]
    # `say` uses the server only if it answers its probe within 0.2 s; on a busy
    # machine it may load the models itself instead (slower, same result).
    print(f"`voxclone say` through the server: {walk.via_server} of {walk.says}")
    print(f"{len(timings)} README commands in {sum(t for t, _ in timings):.1f} s; slowest:")
    print(*(f"{s:5.1f} s  {n[:70]}" for s, n in slowest), sep="\n")
