"""The pipeline stages before run: model (load), passes (optimize), partition, planner/executor."""
