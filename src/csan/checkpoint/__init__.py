"""Safe, atomic checkpoints: weights in safetensors, everything else in JSON or SentencePiece's format.

Nothing here unpickles: model and optimizer tensors are read with safetensors, metadata with ``json``.
A folder is written aside (``<name>.tmp-<pid>``) and renamed into place, so a checkpoint on disk is
always complete; the ``LAST``/``BEST`` pointer files are replaced atomically.

A *model folder* (what ``csan translate --model`` reads) holds ``model.safetensors``, ``config.json``
and ``spm.model``. A run folder holds ``model/`` (the final model) and ``checkpoints/step_NNNNNNNN/``
(model folder + ``trainer.safetensors`` + ``trainer.json`` for resuming).

- :mod:`csan.checkpoint.files`: atomic text files and folders;
- :mod:`csan.checkpoint.model_dir`: model folders (write, find, read, average);
- :mod:`csan.checkpoint.run_dir`: a run's ``step_*`` folders and its ``LAST``/``BEST`` pointers;
- :mod:`csan.checkpoint.trainer_state`: optimizer and RNG states, without pickle;
- :mod:`csan.checkpoint.ownership`: which existing folders csan may write over (its own only).

This package sits below the models: it never builds one (``csan.decoding.load_model`` does).
"""

from csan.checkpoint.files import (
    atomic_write_text,
    remove_folder,
    remove_stale_temporaries,
    write_folder_atomically,
)
from csan.checkpoint.model_dir import (
    PICKLE_SUFFIXES,
    average_model_dirs,
    find_model_dir,
    load_weights,
    read_model_meta,
    read_spm,
    save_model_dir,
)
from csan.checkpoint.ownership import (
    check_model_output,
    check_run_output,
    is_model_folder,
    is_run_folder,
)
from csan.checkpoint.run_dir import (
    CHECKPOINT_FILES,
    best_checkpoint,
    is_unplanned,
    latest_checkpoint,
    planned_step_folders,
    step_folders,
)
from csan.checkpoint.trainer_state import (
    check_trainer_state,
    load_trainer_state,
    optimizer_from_files,
    optimizer_to_files,
    save_trainer_state,
)

__all__ = [
    "CHECKPOINT_FILES",
    "PICKLE_SUFFIXES",
    "atomic_write_text",
    "average_model_dirs",
    "best_checkpoint",
    "check_model_output",
    "check_run_output",
    "check_trainer_state",
    "find_model_dir",
    "is_model_folder",
    "is_run_folder",
    "is_unplanned",
    "latest_checkpoint",
    "load_trainer_state",
    "load_weights",
    "optimizer_from_files",
    "optimizer_to_files",
    "planned_step_folders",
    "read_model_meta",
    "read_spm",
    "remove_folder",
    "remove_stale_temporaries",
    "save_model_dir",
    "save_trainer_state",
    "step_folders",
    "write_folder_atomically",
]
