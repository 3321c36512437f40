"""Write the example's AVSBench S4 folder: eight procedural clips of five 64x64 frames and 5 s of sound.

Usage (from this folder, once, before the first run): ``python make_data.py``. The sounds are
5 s of 16 kHz PCM each (160 KB a clip), too large to ship, so this script writes them (a few
seconds). The clips are the package's procedural audio-visual validation clips: coloured shapes,
each class with its own chord; the target is the shape that sounds. The layout is AVSBench's
single-source (S4) set::

    data/Single-source/s4_meta_data.csv                                   name,category,split
    data/Single-source/s4_data/visual_frames/test/<category>/<clip>/<clip>_1.png .. _5.png
    data/Single-source/s4_data/gt_masks/test/<category>/<clip>/<clip>_1.png .. _5.png
    data/Single-source/s4_data/audio_wav/test/<category>/<clip>.wav
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
from PIL import Image

from pytest_segrobust.data.demo_avs import FRAMES, SAMPLE_RATE, SOURCES, generate_clip

ROOT = Path(__file__).resolve().parent / "data" / "Single-source"
CLIPS = 8
SPLIT = "test"


def write_wav(path: Path, waveform: np.ndarray) -> None:
    """Write a mono waveform in ``[-1, 1]`` as 16-bit PCM at AVSBench's 16 kHz.

    Shape:
        waveform: ``(S,)`` float.
    """
    pcm = np.round(np.clip(waveform, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.tobytes())


def main() -> None:
    """Draw the clips and write their frames, masks, sounds and the metadata csv."""
    data = ROOT / "s4_data"
    rows = ["name,category,split"]
    for index in range(CLIPS):
        clip = generate_clip("val", index)
        # AVSBench files a clip under what sounds in it: here the class of the first sounding shape.
        sounding = next(shape for shape in clip.plan.shapes if any(shape.sounding))
        category = SOURCES[sounding.source].name.replace(" ", "_")
        name = f"clip-{index:02d}"
        rows.append(f"{name},{category},{SPLIT}")
        frames_dir = data / "visual_frames" / SPLIT / category / name
        masks_dir = data / "gt_masks" / SPLIT / category / name
        sound_dir = data / "audio_wav" / SPLIT / category
        for folder in (frames_dir, masks_dir, sound_dir):
            folder.mkdir(parents=True, exist_ok=True)
        for frame in range(FRAMES):
            pixels = np.ascontiguousarray(clip.frames[frame].transpose(1, 2, 0))
            Image.fromarray(pixels).save(frames_dir / f"{name}_{frame + 1}.png")
            Image.fromarray((clip.masks[frame] * 255).astype(np.uint8)).save(masks_dir / f"{name}_{frame + 1}.png")
        write_wav(sound_dir / f"{name}.wav", clip.waveform)
    (ROOT / "s4_meta_data.csv").write_text("\n".join(rows) + "\n")
    print(f"wrote {CLIPS} clips under {ROOT}")


if __name__ == "__main__":
    main()
