"""tahrix_lab.lab"""
