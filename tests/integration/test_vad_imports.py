"""Speech detection imports no torch, checked in a fresh child interpreter (beside
test_vad_silero.py, which checks the detector against the package).
"""

from __future__ import annotations

import sys
from pathlib import Path


def test_detection_imports_no_torch(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys, numpy as np\n"
        "from voxclone.synth.audio.vad import SpeechDetector\n"
        "SpeechDetector().speech_segments(np.zeros(16000, np.float32))\n"
        "print('torch' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"
