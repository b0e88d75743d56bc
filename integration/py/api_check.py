#!/usr/bin/env python3
"""The ckptfs Python API and training callbacks, as a user who only pip
installed the wheel has them (integration/python_test.go runs this with the
wheel's virtual environment).

    api_check.py --dir SCRATCH trainer|lightning|errors

trainer:   mounts through ckptfs.mount, runs the Hugging Face Trainer (three
           saves) with ckptfs.callbacks.TrainerCallback, and checks that every
           save's figures reached the other callbacks' on_log (what TensorBoard
           or W&B receive) and equal the mount's report at that moment and the
           files' attributes.
lightning: the same with Lightning, ModelCheckpoint, CSVLogger and
           ckptfs.callbacks.LightningCallback: the figures in metrics.csv.
errors:    the API's errors: a busy mount point, a store of another user
           (as root), a store in use; FUSE missing is checked by the Go test,
           which hides /dev/fuse in a mount namespace (--expect-no-fuse).

Prints "ok ..." lines; any failed check raises (exit 1).
"""
import argparse
import csv
import glob
import json
import os
import sys

import ckptfs
from ckptfs import callbacks as cb


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def checkpoint_figures(paths):
    """Logical and stored bytes of the checkpoint files under paths, read
    back from the files themselves."""
    logical = stored = 0
    for f in cb._files(paths):
        logical += os.stat(f).st_size
        stored += ckptfs.file_info(f)["stored_bytes"]
    return logical, stored


def same_as_report(figures, stats, what):
    check(figures[cb.WRITTEN_VOLUME_RATIO] == stats["written_volume_ratio"],
          "%s: logged written_volume_ratio %r, report %r" % (what, figures[cb.WRITTEN_VOLUME_RATIO],
                                                            stats["written_volume_ratio"]))
    if stats.get("erase_ratio") is None:
        check(cb.ERASE_RATIO not in figures, "%s: erase_ratio logged while the report has none" % what)
    else:
        check(figures.get(cb.ERASE_RATIO) == stats["erase_ratio"],
              "%s: logged erase_ratio %r, report %r" % (what, figures.get(cb.ERASE_RATIO), stats["erase_ratio"]))
    check(figures[cb.COMMIT_LAG] >= 0, "%s: negative commit lag" % what)


def tiny_gpt2():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=32,
                                      bos_token_id=0, eos_token_id=0))


def run_trainer(a):
    import torch
    import transformers

    saves, every = 3, 5
    with ckptfs.mount(os.path.join(a.dir, "mnt"), store=os.path.join(a.dir, "store")) as m:
        out = os.path.join(m.path, "run")
        g = torch.Generator().manual_seed(1)
        data = [torch.randint(0, 256, (32,), generator=g) for _ in range(64)]

        class DS(torch.utils.data.Dataset):
            def __len__(self):
                return len(data)

            def __getitem__(self, i):
                return {"input_ids": data[i], "labels": data[i]}

        seen = []  # what a reporting integration after ours receives

        class Recorder(transformers.TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and cb.STORED in logs:
                    name = "checkpoint-%d" % state.global_step
                    d = os.path.join(args.output_dir, name)
                    # The report and the files, at the moment the figures
                    # are logged: nothing is written meanwhile.
                    seen.append((name, dict(logs), m.stats(), checkpoint_figures([d])))

        args = transformers.TrainingArguments(
            output_dir=out, max_steps=saves * every, per_device_train_batch_size=4, learning_rate=1e-3,
            save_strategy="steps", save_steps=every, save_total_limit=2, logging_steps=every, report_to="none",
            use_cpu=True, seed=0, dataloader_num_workers=0, disable_tqdm=True)
        callback = cb.TrainerCallback()
        trainer = transformers.Trainer(model=tiny_gpt2(), args=args, train_dataset=DS(),
                                       callbacks=[callback, Recorder()])
        trainer.train()

        check(callback.trainer is trainer, "the callback did not find its Trainer")
        check(len(seen) == saves, "figures of %d saves reached on_log, want %d" % (len(seen), saves))
        logged = [h for h in trainer.state.log_history if cb.STORED in h]
        check(len(logged) == saves, "log history has %d saves' figures, want %d" % (len(logged), saves))
        for name, logs, stats, (logical, stored) in seen:
            check(logs[cb.LOGICAL] == logical and logs[cb.STORED] == stored,
                  "%s: logged %r/%r bytes, the files hold %d/%d" % (name, logs[cb.LOGICAL], logs[cb.STORED],
                                                                    logical, stored))
            check(0 < stored, "%s: nothing stored" % name)
            same_as_report(logs, stats, name)
        # Later saves are deltas: the last stores less than its logical bytes.
        check(seen[-1][3][1] < seen[-1][3][0], "the last checkpoint stored %d of %d bytes" % (seen[-1][3][1],
                                                                                             seen[-1][3][0]))
        print("ok trainer: %d saves logged through Trainer.log; last %s" % (saves, cb.describe(seen[-1][0],
                                                                                          seen[-1][1])))
    check(not m.mounted and not os.path.ismount(m.path), "still mounted after the with block")
    print("ok trainer: unmounted on exit")


def run_lightning(a):
    import lightning as L
    import torch

    saves, every = 4, 4
    with ckptfs.mount(os.path.join(a.dir, "mnt"), store=os.path.join(a.dir, "store"), device_size="64MiB") as m:
        # A small device (a mount option passed through) filled past its
        # size by fsynced files, so that both it and the shadow erase
        # blocks and the report has an erase_ratio for the callback to log.
        # (A checkpoint deleted within the dirty expiry is never charged to
        # the shadow, docs/NANDSIM.md, so the training alone would not.)
        for i in range(4):
            junk = os.path.join(m.path, "junk.bin")
            with open(junk, "wb") as f:
                f.write(os.urandom(40 << 20))
                f.flush()
                os.fsync(f.fileno())
            os.unlink(junk)
        check(m.stats()["erase_ratio"] is not None, "the fsynced files made no erase: %r" % m.stats()["shadow"])
        class Model(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(64, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 1))

            def training_step(self, batch, i):
                x, y = batch
                self.log("step", float(self.global_step))
                return torch.nn.functional.mse_loss(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters(), lr=1e-3)

        torch.manual_seed(0)
        x = torch.randn(256, 64)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)
        ckdir = os.path.join(m.path, "lit", "checkpoints")
        logdir = os.path.join(a.dir, "logs")  # the CSV logger writes outside the mount

        seen = []  # what a logger receives, with the report at that moment

        class Recorder(L.pytorch.loggers.Logger):
            name, version = "recorder", 0

            def log_metrics(self, metrics, step=None):
                if cb.STORED in metrics:
                    seen.append((dict(metrics), m.stats()))

            def log_hyperparams(self, *args, **kwargs):
                pass

        callback = cb.LightningCallback()
        ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=ckdir, every_n_train_steps=every, save_top_k=2,
                                                   monitor="step", mode="max")
        trainer = L.Trainer(max_steps=saves * every, accelerator="cpu", devices=1, enable_progress_bar=False,
                            enable_model_summary=False,
                            logger=[L.pytorch.loggers.CSVLogger(logdir, name="csv"), Recorder()],
                            callbacks=[ckpt, callback])
        trainer.fit(Model(), loader)

        history = callback.reporter.history
        check(len(history) == saves, "the callback measured %d saves, want %d" % (len(history), saves))
        check(len(seen) == saves, "the loggers received %d saves' figures, want %d" % (len(seen), saves))
        for h, (logged, stats) in zip(history, seen):
            check({k: v for k, v in h.items() if k != "checkpoint"} == logged,
                  "%s: measured %r, logged %r" % (h["checkpoint"], h, logged))
            same_as_report(logged, stats, h["checkpoint"])
        check(cb.ERASE_RATIO in history[-1], "no erase_ratio logged though the report has one")
        rows = []
        with open(glob.glob(os.path.join(logdir, "csv", "version_*", "metrics.csv"))[0]) as f:
            for row in csv.DictReader(f):
                if row.get(cb.STORED):
                    rows.append(row)
        check(len(rows) == saves, "metrics.csv has %d rows of ckptfs figures, want %d" % (len(rows), saves))
        kept = 0
        for h, row in zip(history, rows):
            for key in (cb.LOGICAL, cb.STORED, cb.WRITTEN_VOLUME_RATIO, cb.COMMIT_LAG, cb.ERASE_RATIO):
                if key in h:
                    check(float(row[key]) == h[key], "metrics.csv %s %s, the callback logged %r" % (key, row[key],
                                                                                                  h[key]))
            path = os.path.join(ckdir, h["checkpoint"])
            if not os.path.exists(path):
                continue  # rotated out
            kept += 1
            logical, stored = checkpoint_figures([path])
            check(h[cb.LOGICAL] == logical and h[cb.STORED] == stored,
                  "%s: measured %r/%r bytes, the file holds %d/%d" % (path, h[cb.LOGICAL], h[cb.STORED], logical,
                                                                      stored))
        check(kept == 2, "%d checkpoints kept, want 2" % kept)
        check(history[-1][cb.STORED] < history[-1][cb.LOGICAL], "the last checkpoint is not stored as a delta")
        print("ok lightning: %d saves in metrics.csv; last %s" % (saves, cb.describe(history[-1]["checkpoint"],
                                                                                   history[-1])))


def run_errors(a):
    if a.expect_no_fuse:
        try:
            ckptfs.mount(os.path.join(a.dir, "mnt"), store=os.path.join(a.dir, "store-nofuse"))
        except ckptfs.FuseUnavailableError as e:
            check("/dev/fuse" in e.reason, "FuseUnavailableError without the reason: %r" % e.reason)
            print("ok errors: no FUSE: %s" % e.reason)
            return
        raise AssertionError("mount without FUSE did not raise FuseUnavailableError")

    mnt = os.path.join(a.dir, "mnt")
    os.makedirs(mnt, exist_ok=True)
    with ckptfs.mount(mnt, store=os.path.join(a.dir, "store")) as m:
        check(os.path.ismount(m.path), "not mounted")
        check(m.store == os.path.join(a.dir, "store"), "Mount.store %r" % m.store)
        with open(os.path.join(m.path, "f.bin"), "wb") as f:
            f.write(os.urandom(1 << 20))
        info = ckptfs.file_info(os.path.join(m.path, "f.bin"))
        check(isinstance(info["stored_bytes"], int) and info["stored_bytes"] > 0, "file_info %r" % info)
        check(m.stats()["file_count"] == 1, "stats file_count %r" % m.stats()["file_count"])
        try:
            ckptfs.mount(mnt, store=os.path.join(a.dir, "store2"))
            raise AssertionError("a second mount on a busy mount point succeeded")
        except ckptfs.MountPointError as e:
            check("busy" in e.reason, "MountPointError reason %r" % e.reason)
            print("ok errors: busy mount point: %s" % e.reason)
        other = os.path.join(a.dir, "mnt-b")
        os.makedirs(other, exist_ok=True)
        try:
            ckptfs.mount(other, store=os.path.join(a.dir, "store"))
            raise AssertionError("a second daemon on a store in use succeeded")
        except ckptfs.StoreError as e:
            check("in use" in e.reason, "StoreError reason %r" % e.reason)
            print("ok errors: store in use: %s" % e.reason)
    plain = os.path.join(a.dir, "plain.bin")
    open(plain, "wb").close()
    try:
        ckptfs.file_info(plain)
        raise AssertionError("file_info of a plain file succeeded")
    except ckptfs.NotOnCkptfsError as e:
        print("ok errors: file_info off ckptfs: %s" % e)
    try:
        ckptfs.mount(plain)
        raise AssertionError("mount on a regular file succeeded")
    except ckptfs.MountPointError as e:
        check("not a directory" in e.reason, "MountPointError reason %r" % e.reason)
        print("ok errors: mount point a file: %s" % e.reason)
    try:
        ckptfs.mount(os.path.join(a.dir, "missing"), create=False)
        raise AssertionError("mount on a missing directory succeeded")
    except ckptfs.MountPointError as e:
        check("does not exist" in e.reason, "MountPointError reason %r" % e.reason)
        print("ok errors: missing mount point: %s" % e.reason)
    if os.geteuid() == 0:
        theirs = os.path.join(a.dir, "theirs")
        os.makedirs(theirs, mode=0o700)
        os.chown(theirs, 65534, 65534)
        try:
            ckptfs.mount(mnt, store=theirs)
            raise AssertionError("a store of another user was mounted")
        except ckptfs.StoreError as e:
            check("not to you" in e.reason, "StoreError reason %r" % e.reason)
            print("ok errors: store of another user: %s" % e.reason)
    else:
        print("NOT CHECKED: a store of another user (needs root to chown one)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["trainer", "lightning", "errors"])
    p.add_argument("--dir", required=True)
    p.add_argument("--expect-no-fuse", action="store_true")
    a = p.parse_args()
    check("torch" not in sys.modules, "import ckptfs imported torch")
    {"trainer": run_trainer, "lightning": run_lightning, "errors": run_errors}[a.what](a)


if __name__ == "__main__":
    main()
