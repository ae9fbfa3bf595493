"""assignment"""
