"""tahrix_lab.case"""
