"""Clean: planning (`plan`, with what a clean finishes first, `rollbacks`) and execution
(`execute`) of the deletion of file slices no reader needs any more."""
