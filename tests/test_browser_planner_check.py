"""The Planner page's "Check a run you have" in a real Chromium: a DeepSpeed JSON uploaded with its model's Hugging
Face config.json shows core's row for the pair, and its link opens that row as the page's own inputs."""

import json
import re
from pathlib import Path

import pytest

from core.configs.check import check
from tests.browser_layout import settle

pytestmark = [pytest.mark.browser, pytest.mark.server]

DATA = Path(__file__).parent / "data" / "configs"
MAIN = '[data-testid="stMain"]'
HF = DATA / "hf_llama3.1_8b_instruct_config.json"
# ZeRO-3 over the 64 data-parallel ranks its batch implies (64 = 1 x 1 x d)
DS = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}


def metric(main, label: str) -> str:
    box = main.locator('[data-testid="stMetric"]', has_text=label).locator('[data-testid="stMetricValue"]')
    return box.last.inner_text()


def test_an_uploaded_pair_is_checked_and_opens_in_the_planner(page, streamlit_server, tmp_path):
    ds = tmp_path / "ds_config.json"
    ds.write_text(json.dumps(DS))
    row = check([(ds.name, ds.read_text()), (HF.name, HF.read_text())]).row
    assert row["fits"] and (row["t"], row["p"], row["d"], row["zero_stage"]) == (1, 1, 64, 3)
    page.goto(streamlit_server + "/planner")
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
    main = page.locator(MAIN)
    main.get_by_text("Check a run you have").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files([str(ds), str(HF)])
    main.get_by_text(re.compile(r"Checked .*\(huggingface\+deepspeed\)")).first.wait_for(timeout=60_000)
    assert metric(main, "Fits") == "yes"
    assert metric(main, "Step time") == f"{row['step_time_s']:,.2f} s"
    link = main.get_by_role("link", name="Open this run in the planner")
    assert "fix_d=64" in link.get_attribute("href")
    settle(page)  # a click while the run redraws the link can land on the element being replaced
    with page.expect_navigation(url=re.compile(r".*/planner\?.*fix_d=64"), wait_until="commit", timeout=60_000):
        link.click()
    main.get_by_text("1 x 1 x 64", exact=True).first.wait_for(timeout=60_000)
    assert metric(main, "Step time") == f"{row['step_time_s']:,.2f} s"  # the page's own headline: the same row
