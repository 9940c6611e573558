"""The config of a tiny run made as a user would: their network, sampler and callback named by
class path (``my_extensions.py``, importable as this folder is on ``sys.path``)."""

from pathlib import Path


def user_config(run_dir: Path, max_epochs: int = 2) -> dict:
    """A fit config naming the user's classes; tiny rules, a few seconds on one thread."""
    return {
        "seed_everything": 3,
        "threads": 1,
        "trainer": {
            "max_epochs": max_epochs,
            "default_root_dir": str(run_dir),
            "accelerator": "cpu",
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "logger": {
                "class_path": "pytorch_lightning.loggers.CSVLogger",
                "init_args": {"save_dir": str(run_dir), "name": "csv"},
            },
            "callbacks": [{"class_path": "my_extensions.NodeCounter"}],
        },
        "model": {
            "rules": "tiny",
            "network": {"class_path": "my_extensions.TwoLayerNet", "init_args": {"hidden": 8}},
            "sampler": {
                "class_path": "my_extensions.OnPolicySampling",
                "init_args": {"walkers": 16},
            },
            "traversals_per_player": 16,
            "advantage_buffer_size": 2000,
            "strategy_buffer_size": 2000,
            "batch_size": 32,
            "advantage_updates": 4,
            "strategy_updates": 4,
            "inference_buckets": None,
            "final_eval_games": 0,
        },
    }
