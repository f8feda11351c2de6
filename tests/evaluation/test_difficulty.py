import json


from storage.store import Store
from tasks.curation.config import CurateConfig
from tasks.curation.dataset import build_curated_version, plan_curation
from tasks.evaluation.difficulty import DifficultyConfig, build_difficulty_version, tag
from tasks.generation.base import Completion
from tasks.models.factory import init_model


def test_tag_thresholds():
    cfg = DifficultyConfig(hard_below=0.25, easy_from=0.75)
    assert [tag(x, cfg) for x in (0, 0.125, 0.25, 0.5, 0.75, 1.0)] == ["unsolved", "hard", "medium", "medium", "easy", "easy"]


class _Canned:
    """Answers each problem "a+b" correctly on the first `a` of its k samples."""
    def __init__(self, tok):
        self.tok = tok

    def generate(self, prompts, params):
        out = []
        for p in prompts:
            a, b = (int(x) for x in p.split("What is ")[1].split("?")[0].split("+"))
            out.append([Completion(f"<think>x</think>\\boxed{{{a + b if j < a else -1}}}", []) for j in range(params.n)])
        return out


def test_pass_rates_on_a_child_version(tmp_path):
    from transformers import AutoTokenizer

    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps({"problem": f"What is {a}+{b}?", "answer": str(a + b)}) + "\n"
                           for a, b in [(0, 5), (1, 7), (3, 2), (4, 4)]))
    store = str(tmp_path / "store")
    cfg = CurateConfig(sources=[{"name": "m", "path": str(src)}], store=store)
    parent = build_curated_version(cfg, *plan_curation(cfg))
    Store(store).publish(parent.id)
    model = init_model(tmp_path / "model", ["What is 1+2? \\boxed{3}"] * 20)
    v = build_difficulty_version(store, str(model), DifficultyConfig(k=4), generator=_Canned(AutoTokenizer.from_pretrained(model)))
    rows = {r["problem"]: r for r in Store(store).read_table(v.id, "problems").to_pylist()}
    assert rows["What is 0+5?"]["pass_rate"] == 0 and rows["What is 0+5?"]["difficulty"] == "unsolved"
    assert rows["What is 1+7?"]["pass_rate"] == 0.25 and rows["What is 1+7?"]["difficulty"] == "medium"
    assert rows["What is 4+4?"]["difficulty"] == "easy" and rows["What is 4+4?"]["k"] == 4
    assert v.parents == [parent.id] and v.kind == "difficulty"
