"""Deep CFR's checkpoints: what a resumed fit needs beside the networks, saved and restored.

A resumable checkpoint holds the reservoirs, the module's generators and the global RNG
states under the model's ``training_state_key``; a DDP run keeps each rank's in a shard file
beside it (``shards.py``). SD-CFR's stored networks go with every checkpoint, weights-only ones
included, since the deployed policy needs them.
"""

from __future__ import annotations

from typing import Any

import torch
from pytorch_lightning.utilities import rank_zero_warn

from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS, STRATEGY_NETWORK
from lostcities_cfr.errors import NonFiniteError
from lostcities_cfr.training import shards
from lostcities_cfr.training.checkpoint import MODEL_CLASS_KEY, class_path, plain_data


class ResumableState:
    """The checkpoint hooks of ``DeepCFR``, mixed into it.

    What it uses of the module: ``training_state_key``, the buffers (``row_buffers()``,
    ``advantage_buffers``, ``strategy_buffer``, ``value_buffer``, ``value_name``), the
    generators, ``_snapshots``, ``_resume_state``, ``shard_target``, ``hparams`` and
    Lightning's ``trainer``.
    """

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Plain data only, so that the file loads with torch.load(weights_only=True); the
        # class is named for the checkpoint loader's allow-list.
        checkpoint[MODEL_CLASS_KEY] = class_path(type(self))
        checkpoint["hyper_parameters"] = plain_data(dict(checkpoint.get("hyper_parameters", {})))
        if self._snapshots:
            checkpoint["sdcfr"] = {
                "iterations": [t for t, _ in self._snapshots],
                "advantage": [states for _, states in self._snapshots],
            }
        if self.strategy_buffer is None or "optimizer_states" not in checkpoint:
            # No reservoirs to save (an agent's model), or a weights-only checkpoint (such
            # as a best-so-far copy), which plays but does not resume.
            return
        state = {
            "advantage_buffers": [buffer.state_dict() for buffer in self.advantage_buffers],
            "strategy_buffer": self.strategy_buffer.state_dict(),
            "value_buffer": None if self.value_buffer is None else self.value_buffer.state_dict(),
            "traversal_generator": self.traversal_generator.get_state(),
            "batch_generator": self.batch_generator.get_state(),
            # Network re-initialisation (nn.init) draws from the global generators.
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }
        world_size, target = self.trainer.world_size, self.shard_target
        if world_size == 1:
            checkpoint[self.training_state_key] = state
        elif target is None:
            # trainer.save_checkpoint called by hand, not through RunCheckpoint, which names
            # the file to every rank: rank 0's rows are all this file can hold.
            rank_zero_warn(
                "a checkpoint saved outside RunCheckpoint holds rank 0's reservoirs only; "
                "the other ranks' rows are not in it (training/shards.py)"
            )
            checkpoint[self.training_state_key] = state
        else:
            path, save_id = target
            step, rank = self.trainer.global_step, self.trainer.global_rank
            shards.write_shard(
                state, path.with_name(shards.shard_name(path, rank, world_size, save_id)), step
            )
            checkpoint[self.training_state_key] = shards.manifest(path, world_size, save_id, step)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A resume may change the learning rate: this run's, not the saved optimizers' copy.
        for optimizer_state in checkpoint.get("optimizer_states", []):
            for group in optimizer_state["param_groups"]:
                group["lr"] = self.hparams.learning_rate
        # Applied in on_train_start, once the reservoirs exist on the training device;
        # loading weights alone (validate, an agent) never builds them.
        self._resume_state = checkpoint.get(self.training_state_key)
        stored = checkpoint.get("sdcfr", {"iterations": [], "advantage": []})
        self._snapshots = list(zip(stored["iterations"], stored["advantage"], strict=True))

    def _restore_training_state(self, entry: dict[str, Any]) -> None:
        trainer = self.trainer
        state = shards.rank_state(trainer.ckpt_path, entry, trainer.global_rank, trainer.world_size)
        buffer_states = dict(zip(ADVANTAGE_NETWORKS, state["advantage_buffers"], strict=True))
        buffer_states[STRATEGY_NETWORK] = state["strategy_buffer"]
        if self.value_name is not None:
            buffer_states[self.value_name] = state["value_buffer"]
        for name, buffer in self.row_buffers().items():
            buffer_state = buffer_states[name]
            try:
                buffer.load_state_dict(buffer_state)
            except NonFiniteError as error:
                raise NonFiniteError(
                    f"checkpoint {self.trainer.ckpt_path}: buffer {name}: {error}"
                ) from None
        if state["traversal_generator"] is None:
            return  # a rank the saving run did not have: its own fresh streams
        self.traversal_generator.set_state(state["traversal_generator"])
        self.batch_generator.set_state(state["batch_generator"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
