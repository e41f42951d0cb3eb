"""Training: OptiPrompt (continuous template vectors, encoder frozen) and the prompt-based
contrastive fine-tuner (unsupervised with two denoised templates, supervised on NLI)."""
