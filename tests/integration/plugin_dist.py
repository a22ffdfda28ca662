"""What ``pip install <plug-in>`` leaves in site-packages: a package whose
``create`` builds an engine, and a ``dist-info`` naming it in the
``voxclone.engines`` entry-point group (shared by the plug-in engine tests)."""

from __future__ import annotations

from pathlib import Path

from voxclone.synth.engine import registry


def install_engine_plugin(
    site: Path, *, package: str, distribution: str, engine: str, engine_class: str, argument: str
) -> None:
    """``package``'s ``create(config)`` returns ``engine_class(argument)``;
    ``engine_class`` is ``module.Class`` (a module on the test's path)."""
    module, cls = engine_class.rsplit(".", 1)
    root = site / package
    root.mkdir(parents=True)
    (root / "__init__.py").write_text(
        f"from {module} import {cls}\n\n\ndef create(config):\n    return {cls}({argument!r})\n"
    )
    info = site / f"{package}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n{engine} = {package}:create\n"
    )
