"""Table-6 templates (SPEC §2), record rendering, and the chat-template formatting used for training/prompts."""

import pytest

from fedmem.data import TEMPLATES, TaskConfig, format_example, format_prompt
from fedmem.data.templates import one_line, render_record
from tests.fixtures.bpe import bpe_tokenizer

# SPEC §2, copied character for character.
SPEC_TABLE_6 = {
    "summarization": ("Please summarize the following abstract into a title. {abstract}", "{title}", "abstract"),
    "dialog": (
        "If you are a doctor, please answer the medical questions based on the patient's description. {patient}",
        "{doctor}",
        "patient",
    ),
    "qa": ("{question} {context}", "{answer}", "context"),
    "classification": (
        "Please classify the following passage into one of the following categories: BACKGROUND, OBJECTIVE, "
        "METHODS, RESULTS, or CONCLUSIONS. {passage}",
        "{label}",
        "passage",
    ),
}


@pytest.mark.parametrize("task", sorted(SPEC_TABLE_6))
def test_templates_are_spec_table_6(task):
    user, assistant, mem = SPEC_TABLE_6[task]
    assert (TEMPLATES[task].user, TEMPLATES[task].assistant, TEMPLATES[task].mem_field) == (user, assistant, mem)
    cfg = TaskConfig(name=task)
    assert (cfg.user_template, cfg.assistant_template, cfg.mem_field) == (user, assistant, mem)


def test_render_puts_the_memorization_text_verbatim_in_the_user_turn():
    t = TEMPLATES["qa"]
    rec = render_record(t.user, t.assistant, t.mem_field,
                        {"question": "Does it work?\n", "context": ["First  part.", "Second\npart."],
                         "answer": " Yes,   it does. "}, "r1", client=2)
    assert rec.mem_text == "First part. Second part."
    assert rec.user == "Does it work? First part. Second part."
    assert rec.assistant == "Yes, it does."
    assert rec.mem_text in rec.user and rec.client == 2 and rec.tags == {}
    assert one_line(None) == "" and one_line([["a", " b"], "c\n"]) == "a b c"


CORPUS = [f"Patient {i} has chest pain and a dry cough for {i % 9 + 2} days. Doctor: please rest." for i in range(300)]


def test_format_with_a_chat_template():
    tok = bpe_tokenizer(CORPUS, vocab_size=300, chat_template=True)
    prompt = format_prompt(tok, "I have a cough.")
    example = format_example(tok, "I have a cough.", "Please rest.")
    assert prompt == "<|im_start|>user\nI have a cough.<|im_end|>\n<|im_start|>assistant\n"
    assert example == "<|im_start|>user\nI have a cough.<|im_end|>\n<|im_start|>assistant\nPlease rest.<|im_end|>\n"
    assert example.startswith(prompt)  # generation continues exactly where training text goes on
    ids = tok(example, add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids and tok.eos_token_id in ids


def test_format_without_a_chat_template_uses_the_plain_fallback():
    tok = bpe_tokenizer(CORPUS, vocab_size=300, chat_template=False)
    assert not tok.chat_template
    prompt = format_prompt(tok, "I have a cough.")
    example = format_example(tok, "I have a cough.", "Please rest.")
    assert prompt == "User: I have a cough.\nAssistant:"
    assert example == "User: I have a cough.\nAssistant: Please rest.<|im_end|>"
    assert example.startswith(prompt)
    assert tok(example, add_special_tokens=False)["input_ids"][-1] == tok.eos_token_id
