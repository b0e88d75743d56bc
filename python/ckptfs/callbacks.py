"""The saving in the training's own logs: after each checkpoint saved into a
ckptfs mount, log its logical and stored bytes, the run's
written_volume_ratio and erase_ratio so far, and how long after the save
ckptfs had committed it, through the trainer's logging (TensorBoard, W&B,
CSV loggers, the Trainer's log history).

    from ckptfs.callbacks import TrainerCallback       # Hugging Face
    Trainer(..., callbacks=[TrainerCallback()])

    from ckptfs.callbacks import LightningCallback     # Lightning
    L.Trainer(..., callbacks=[LightningCallback()])

Each class is made when first imported from here, on top of its framework,
so that importing this module imports neither framework (nor torch).
LightningCallback subclasses lightning.pytorch's Callback, or
pytorch_lightning's where only that is installed; PLCallback is always
pytorch_lightning's, for trainers of that package.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from types import FrameType
from typing import Any, Dict, Iterable, List, Optional

from ckptfs import NotOnCkptfsError, file_info, mount_root, read_stats

__all__ = ["LightningCallback", "PLCallback", "TrainerCallback", "measure_save"]

log = logging.getLogger("ckptfs")

# The metric names, the same under every trainer.
LOGICAL = "ckptfs/checkpoint_logical_bytes"
STORED = "ckptfs/checkpoint_stored_bytes"
WRITTEN_VOLUME_RATIO = "ckptfs/written_volume_ratio"
ERASE_RATIO = "ckptfs/erase_ratio"
COMMIT_LAG = "ckptfs/commit_lag_s"


def _files(paths: Iterable[str]) -> List[str]:
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, names in os.walk(p):
                dirs.sort()
                out.extend(os.path.join(d, n) for n in sorted(names))
        elif os.path.isfile(p):
            out.append(p)
    return [f for f in out if os.path.isfile(f) and not os.path.islink(f)]


def measure_save(paths: Iterable[str], saved_at: Optional[float] = None) -> Optional[Dict[str, float]]:
    """The figures of one save: the checkpoint files or directories in paths,
    just saved (at time.monotonic() saved_at). Waits until ckptfs has
    committed every file. None when the checkpoint is not on a ckptfs mount.
    """
    saved_at = time.monotonic() if saved_at is None else saved_at
    files = _files(paths)
    if not files:
        return None
    root = mount_root(files[0])
    if root is None:
        return None
    logical = stored = 0
    for f in files:
        try:
            info = file_info(f)  # waits for the file's commit
            size = os.stat(f).st_size
        except (FileNotFoundError, NotOnCkptfsError):
            continue  # removed or replaced since the save
        logical += size
        stored += int(info.get("stored_bytes", 0))
    lag = time.monotonic() - saved_at
    stats = read_stats(root)
    figures = {LOGICAL: float(logical), STORED: float(stored), COMMIT_LAG: lag,
               WRITTEN_VOLUME_RATIO: float(stats["written_volume_ratio"])}
    if stats.get("erase_ratio") is not None:  # none until the device erased a block
        figures[ERASE_RATIO] = float(stats["erase_ratio"])
    return figures


def describe(name: str, figures: Dict[str, float]) -> str:
    """One log line for a save's figures."""
    logical, stored = figures[LOGICAL], figures[STORED]
    erase = figures.get(ERASE_RATIO)
    return ("ckptfs: %s: %.1f MB logical, %.1f MB stored (%.2f), committed %.2f s after the save; "
            "run so far: written_volume_ratio %.3f, erase_ratio %s" % (
                name, logical / 1e6, stored / 1e6, stored / logical if logical else 0.0, figures[COMMIT_LAG],
                figures[WRITTEN_VOLUME_RATIO], "%.3f" % erase if erase is not None else "n/a (no erase yet)"))


class _Reporter:
    """What both callbacks share: measure a save, warn once when the
    checkpoints are not on a ckptfs mount."""

    def __init__(self) -> None:
        self.history: List[Dict[str, Any]] = []
        self._warned = False

    def measure(self, name: str, paths: List[str], saved_at: float) -> Optional[Dict[str, float]]:
        figures = measure_save(paths, saved_at)
        if figures is None:
            if not self._warned:
                log.warning("ckptfs: %s is not on a ckptfs mount; the ckptfs callback logs nothing", paths[0])
                self._warned = True
            return None
        log.info("%s", describe(name, figures))
        self.history.append(dict(figures, checkpoint=name))
        return figures


def _find_owner(callback: Any) -> Any:
    """The Hugging Face Trainer whose callback handler holds callback, found
    up the call stack of one of its events (no event hands the trainer over)."""
    f: Optional[FrameType] = sys._getframe(1)
    while f is not None:
        obj = f.f_locals.get("self")
        handler = getattr(obj, "callback_handler", None)
        if handler is not None and callback in getattr(handler, "callbacks", ()):
            return obj
        f = f.f_back
    return None


def _make_trainer_callback() -> type:
    import transformers  # type: ignore[import-not-found, unused-ignore]

    class TrainerCallback(transformers.TrainerCallback):  # type: ignore[misc, unused-ignore]
        """Logs each checkpoint-N/ saved into a ckptfs mount through
        Trainer.log, so that every reporting integration receives it."""

        def __init__(self) -> None:
            self.reporter = _Reporter()
            self.trainer: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.trainer = _find_owner(self)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            saved_at = time.monotonic()
            if not state.is_world_process_zero:
                return
            name = "checkpoint-%d" % state.global_step
            figures = self.reporter.measure(name, [os.path.join(args.output_dir, name)], saved_at)
            if figures is None:
                return
            if self.trainer is not None:
                self.trainer.log(dict(figures))
            else:  # no trainer found: at least the log history has them
                state.log_history.append(dict(figures, step=state.global_step))

    TrainerCallback.__module__ = __name__
    return TrainerCallback


def _make_lightning_callback(package: str) -> type:
    if package == "lightning":
        from lightning.pytorch import Callback  # type: ignore[import-not-found, unused-ignore]
    else:
        from pytorch_lightning import Callback  # type: ignore[import-not-found, no-redef, unused-ignore]

    class LightningCallback(Callback):  # type: ignore[misc, unused-ignore]
        """Logs each checkpoint file the trainer saves into a ckptfs mount
        to every logger of the trainer (log_metrics at the global step)."""

        def __init__(self) -> None:
            self.reporter = _Reporter()
            self._strategy: Any = None

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            # The save's end has no hook of its own (on_save_checkpoint
            # runs before the file is written): wrap the strategy's.
            strategy = trainer.strategy
            if self._strategy is strategy:
                return
            save = strategy.save_checkpoint
            reporter = self.reporter

            def save_checkpoint(checkpoint: Any, filepath: Any, *args: Any, **kwargs: Any) -> Any:
                out = save(checkpoint, filepath, *args, **kwargs)
                if trainer.is_global_zero:
                    path = os.fspath(filepath)
                    figures = reporter.measure(os.path.basename(path), [path], time.monotonic())
                    if figures is not None:
                        for logger in trainer.loggers:
                            logger.log_metrics(dict(figures), step=trainer.global_step)
                return out

            strategy.save_checkpoint = save_checkpoint
            self._strategy = strategy

        def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if self._strategy is not None:
                self._strategy.__dict__.pop("save_checkpoint", None)
                self._strategy = None

    LightningCallback.__module__ = __name__
    return LightningCallback


_made: Dict[str, type] = {}


def __getattr__(name: str) -> type:
    if name not in ("TrainerCallback", "LightningCallback", "PLCallback"):
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    if name not in _made:
        if name == "TrainerCallback":
            _made[name] = _make_trainer_callback()
        elif name == "PLCallback":
            _made[name] = _make_lightning_callback("pytorch_lightning")
        else:
            try:
                import lightning.pytorch  # type: ignore[import-not-found, unused-ignore] # noqa: F401
                package = "lightning"
            except ImportError:
                package = "pytorch_lightning"
            _made[name] = _make_lightning_callback(package)
    return _made[name]
