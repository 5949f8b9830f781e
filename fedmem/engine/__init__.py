"""The model engine: loading a base model and wrapping it in LoRA (``model``), local training (``train``), the
decoding loop (``generation``, ``decoder``, ``sampler``), log-probability scoring (``scoring``) and the batching
they share, with their settings (``config``). It computes on a model and knows nothing of audits, reports or
Flower; it may import ``fedmem.common`` and ``fedmem.data`` (the chat templates training renders)."""
