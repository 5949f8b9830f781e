"""fedmem: memorization audits of language models fine-tuned with federated learning."""
