"""The machinery that runs analyses: what they produce (registry), their order (pipeline), one rank's result, the
forked child for long analyses, and the system a trace ran on."""
