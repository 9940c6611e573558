"""The run's full LightningCLI config, saved beside its logs and stored with every logger."""

from __future__ import annotations

import pytorch_lightning as pl
import yaml
from pytorch_lightning.cli import LightningArgumentParser, SaveConfigCallback
from pytorch_lightning.utilities import rank_zero_only


class SaveConfigToLoggers(SaveConfigCallback):
    """LightningCLI's ``SaveConfigCallback`` that also hands the config to every logger.

    Acts once, at ``setup`` on global rank zero: writes ``config.yaml`` into
    ``trainer.log_dir`` (replacing one left by an earlier run in the same
    folder, so that rerunning a command does not crash) and logs the whole
    config, nested as in the YAML, as hyperparameters: the W&B run's config
    panel, the CSV logger's ``hparams.yaml``. The CLI passes it as
    ``LightningCLI(save_config_callback=SaveConfigToLoggers)``.

    Args:
        parser, config: given by LightningCLI.
        config_filename: name of the saved file.
        overwrite: replace an existing file.
        multifile: keep a multi-file config's structure.
        save_to_log_dir: write the file at all.
    """

    def __init__(
        self,
        parser: LightningArgumentParser,
        config,
        config_filename: str = "config.yaml",
        overwrite: bool = True,
        multifile: bool = False,
        save_to_log_dir: bool = True,
    ) -> None:
        super().__init__(parser, config, config_filename, overwrite, multifile, save_to_log_dir)

    @rank_zero_only
    def save_config(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        config = self.config.clone()
        config.pop("config", None)  # the --config file paths, not settings
        # Through the parser's serializers: plain data, as in config.yaml (a parsed value
        # can be an instance of its restricted type, such as PositiveInt).
        settings = yaml.safe_load(self.parser.dump(config, skip_none=False, skip_check=True))
        for logger in trainer.loggers:
            logger.log_hyperparams(settings)
