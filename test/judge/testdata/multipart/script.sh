#!/bin/sh
echo judge-script > /run/judge-script
