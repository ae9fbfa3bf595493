"""submission"""
