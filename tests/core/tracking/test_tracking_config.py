"""Reading and defaulting the `tracking` group, and shaping values for MLflow's limits."""

from __future__ import annotations

from omegaconf import OmegaConf

from argus_core.tracking.config import (
    MlflowSettings,
    clean_key,
    clip,
    flatten_config,
    is_local_uri,
)


def test_null_fields_default_under_cwd(tmp_path):
    cfg = OmegaConf.create({"name": "mlflow", "uri": None, "experiment": None, "run_name": None})
    s = MlflowSettings.from_config(cfg, cwd=str(tmp_path))
    assert s.uri == f"sqlite:///{tmp_path.resolve()}/.argus/mlflow.db"
    assert (tmp_path / ".argus").is_dir()
    assert s.artifact_location == f"{tmp_path.resolve()}/.argus/artifacts"
    assert s.experiment == "argus" and s.run_name is None


def test_server_uri_leaves_artifacts_to_the_server(tmp_path):
    s = MlflowSettings.from_config({"uri": "http://mlflow.team:5000"}, cwd=str(tmp_path))
    assert s.uri == "http://mlflow.team:5000" and s.artifact_location is None
    assert not (tmp_path / ".argus").exists()


def test_local_uris():
    assert is_local_uri("sqlite:////a/b.db") and is_local_uri("/srv/mlruns")
    assert not is_local_uri("https://x") and not is_local_uri("databricks")


def test_flatten_nested_lists_and_nulls():
    cfg = OmegaConf.create({"a": {"b": 1, "c": [1, 2], "d": None, "e": {}}, "f": "${a.b}"})
    assert flatten_config(cfg) == {
        "a.b": "1",
        "a.c": "[1, 2]",
        "a.d": "null",
        "a.e": "{}",
        "f": "1",
    }


def test_keys_and_values_fit_mlflow():
    assert clean_key("policy.BM[0]=x") == "policy.BM_0__x"
    assert len(clean_key("k" * 300)) == 250
    assert clip("abcdef", 5) == "ab..." and clip(12, 5) == "12"
