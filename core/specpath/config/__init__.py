"""The configuration layer: input -> SpeculativeConfig -> resolved SpeculatorConfig -> EngineConfig."""
