"""The checkpoints of a run, its end included: Lightning's ``ModelCheckpoint`` plus the
networks of whatever iteration the run stopped at."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities.rank_zero import rank_zero_info

from lostcities_cfr.training import shards
from lostcities_cfr.training.distributed import lost_peer

FINAL_FILE = "final.ckpt"


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that also saves the end of a run, however it ends.

    ``ModelCheckpoint`` saves every ``every_n_epochs`` iterations, so a run that stops between
    two of them (its ``max_epochs``, ``max_time``, an early stop, Ctrl-C) would keep its last
    iterations in no file, and the figure its final evaluation prints could not be reproduced
    from anything it leaves. This one adds, in ``dirpath``:

    - at the end of ``fit``, the last iteration, resumable (reservoirs, optimizers, loop
      state), unless its interval saved it already; ``last.ckpt`` then links to it
      (``save_at_end``; turn it off where a resumable file is too big to write once more);
    - at the end of ``fit`` and when it stops on an exception (Ctrl-C), ``final.ckpt``: the
      networks as they are, with the model's arguments and no training state (a
      weights-only checkpoint: small, and an agent with ``ckpt:PATH``). It holds the
      networks the final evaluation measures (``DeepCFR.final_eval_games``), which reads
      :attr:`final_path`. An interrupted iteration may be saved half-trained; the file's
      loop state says so (``training.checkpoint.cut_iteration``).

    Weights that are no longer finite (a diverged run) are not saved: the file would not
    load, and the last checkpoint on disk stays the last good one.

    In a DDP run every rank writes its reservoirs to a shard beside each resumable file and
    removes its shards of a file that is replaced or removed (``training/shards.py``).

    Args:
        save_at_end: save the last iteration resumably when ``fit`` ends, if not saved yet.
        final_filename: the name of the networks-only file; None writes none.
        **kwargs: ``ModelCheckpoint``'s arguments.
    """

    def __init__(
        self, *args, save_at_end: bool = True, final_filename: str | None = FINAL_FILE, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.save_at_end = save_at_end
        self.final_filename = final_filename
        self.final_path: Path | None = None  # the networks-only file, once written

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Replaces ModelCheckpoint's, which saves last.ckpt at the end only in a fit that
        # saved nothing before (and then as a copy, not a link).
        if self.save_at_end and not self._should_skip_saving_checkpoint(trainer):
            candidates = self._monitor_candidates(trainer)
            self._save_topk_checkpoint(trainer, candidates)
            self._save_last_checkpoint(trainer, candidates)
        self._save_final(trainer, pl_module)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        super().on_exception(trainer, pl_module, exception)
        if trainer.world_size > 1 and lost_peer(exception):
            return  # saving waits for every rank at a barrier, which a dead one never reaches
        self._save_final(trainer, pl_module)
        if self.final_path is not None:
            rank_zero_info(
                f"{type(exception).__name__}: the networks as they were are in {self.final_path}"
            )

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        # Every rank of a DDP run writes its reservoirs beside the file (training/shards.py):
        # the module learns the file's name and a save id common to the ranks here, and each
        # rank removes its older shards of that name once the file has replaced the old one.
        module = trainer.lightning_module
        if trainer.world_size == 1 or self.save_weights_only or not hasattr(module, "shard_target"):
            super()._save_checkpoint(trainer, filepath)
            return
        save_id = trainer.strategy.broadcast(shards.new_save_id())
        module.shard_target = (Path(filepath), save_id)
        try:
            super()._save_checkpoint(trainer, filepath)
        finally:
            module.shard_target = None
        keep = shards.shard_name(filepath, trainer.global_rank, trainer.world_size, save_id)
        shards.remove_stale_shards(filepath, trainer.global_rank, keep=keep)

    def _remove_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        super()._remove_checkpoint(trainer, filepath)
        shards.remove_stale_shards(filepath, trainer.global_rank)

    def _save_final(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.final_filename is None or self.dirpath is None:
            return
        finite = all(
            torch.isfinite(p).all() for p in pl_module.parameters() if p.is_floating_point()
        )
        if not finite:
            rank_zero_info(f"not writing {self.final_filename}: the weights are not finite")
            return
        path = Path(self.dirpath) / self.final_filename
        trainer.save_checkpoint(path, weights_only=True)
        self.final_path = path
