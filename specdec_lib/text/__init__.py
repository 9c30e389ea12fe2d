"""The course's text: the word-level tokenizer and the generated language with its workloads.

Pure Python, no torch: everything else in the library may import from here, and this
package imports nothing else of the library.
"""
