"""tahrix_lab.jobs"""
