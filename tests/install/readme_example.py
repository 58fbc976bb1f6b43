import numpy as np
import lockstep

vocab = lockstep.Vocabulary.load("llama3")  # a bundled tokenizer, or a file path
schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
grammar = lockstep.compile_schema(vocab, schema, compact=True)  # errors raise lockstep.Error
sampler = lockstep.Sampler(temperature=0.7, seed=42)


def my_model(context):  # the ids so far -> logits_width floats
    return np.zeros(vocab.logits_width, dtype=np.float32)  # your model's logits here


ids, text, finish = lockstep.generate(grammar, sampler, my_model, max_tokens=256)
print(text.decode())
