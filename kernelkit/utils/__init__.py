"""Validation and numerical helpers shared by kernelkit modules."""
